"""webhook.admission.jsoncodec against the standard library it stands in for: the same values, exceptions and
bytes, over generated JSON and over the edge cases where orjson alone differs (each of those fails
when the fallback that covers it is removed), and the webhook's patches and replies byte for byte
what the old encoders (json's, kept here) wrote."""

from __future__ import annotations

import base64
import copy
import dataclasses
import datetime
import enum
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.webhook.admission.test_placement_properties import caches, pods
from tests.webhook.helpers import POLICY, golden_cache, pod, review
from webhook.admission.jsoncodec import dumps, loads
from webhook.admission.placement import Settings, mutate
from webhook.admission.requirements import Invalid, requirements
from webhook.admission.review import allowed
from webhook.fleet.cache import FabricCache
from webhook.server.app import reply

# What review.allowed and server.mutate_handler wrote before orjson.
OLD_PATCH = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
OLD_REPLY = json.JSONEncoder(check_circular=False).encode
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "admission"
REVIEWS = sorted(FIXTURES.glob("*.review.json"))
CACHE = golden_cache()
SETTINGS = Settings(cufile_policy=POLICY, inject_nccl_tuning=True)


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 == 1.0 == True in Python), in key order;
    NaN equals NaN and -0.0 differs from 0.0. Walks with its own stack: from Python 3.12 json.loads
    returns values nested deeper than the interpreter's recursion limit (5000 levels below)."""
    pending = [(a, b)]
    while pending:
        a, b = pending.pop()
        if type(a) is not type(b):
            return False
        if isinstance(a, dict):
            if list(a) != list(b):
                return False
            pending.extend((a[k], b[k]) for k in a)
        elif isinstance(a, list):
            if len(a) != len(b):
                return False
            pending.extend(zip(a, b, strict=True))
        elif isinstance(a, float):
            if not (
                (math.isnan(a) and math.isnan(b))
                or (a == b and math.copysign(1, a) == math.copysign(1, b))
            ):
                return False
        elif a != b:
            return False
    return True


def outcome(fn: Any, arg: Any) -> tuple[Any, ...]:
    """What fn(arg) returns, or the type and message of what it raises."""
    try:
        return ("value", fn(arg))
    except (ValueError, TypeError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
        return ("raised", type(err), str(err))


def loads_like_json(body: bytes) -> None:
    got, want = outcome(loads, body), outcome(json.loads, body)
    if want[0] == "value":
        assert got[0] == "value" and same(got[1], want[1]), body[:200]
    else:
        assert got == want, body[:200]


def dumps_like_json(value: Any) -> None:
    assert outcome(dumps, value) == outcome(lambda v: OLD_PATCH(v).encode(), value)


def nested(depth: int, kind: str = "[") -> bytes:
    if kind == "[":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


# ---- loads: the cases where orjson alone differs from json.loads ----
BIG = [
    b"18446744073709551616",  # 2**64: orjson gives a float
    b"-9223372036854775809",  # -2**63 - 1: a float, with only 19 digits
    b"[1,-9999999999999999999,2]",
    b'{"a":{"b":[123456789012345678901234567890]}}',
    # a run of 19 at every offset modulo 9 (the sample in _orjson_reads steps by 9)
    *(b" " * k + b"[-9223372036854775809]" for k in range(9)),
]
ACCEPTED_ONLY_BY_JSON = [
    b"NaN",
    b"[Infinity,-Infinity]",
    b'{"a":NaN}',
    b"1e400",
    b"[-1e400]",
    b'"\\ud800"',  # lone surrogate escapes
    b'"x\\udc00y"',
    b'{"\\ud83d":1}',
    b'"\xed\xa0\x80"',  # a surrogate encoded in UTF-8 (json decodes with surrogatepass)
    '{"a":[1,"é"]}'.encode("utf-16"),
    '{"a":[1,"é"]}'.encode("utf-16-le"),
    '{"a":[1,"é"]}'.encode("utf-16-be"),
    '{"a":[1,"é"]}'.encode("utf-32"),
    '{"a":[1,"é"]}'.encode("utf-32-be"),
    b'\xef\xbb\xbf{"a":1}',  # UTF-8 with a BOM
    nested(1100),  # orjson stops at 1024
    nested(5000, "{"),
]
REFUSED_BY_JSON = [  # orjson's messages differ from json's (the tests compare them)
    b"",
    b" ",
    b"[1,]",
    b"{",
    b"01",
    b"1.",
    b".5",
    b"+1",
    b"tru",
    b"[1e]",
    b"1 2",
    b'{"a" 1}',
    b'{"a":1,}',
    b'"\x01"',
    b'"\\x"',
    b"\xff",
    b'"\xff"',
    b'\x0c{"a":1}',
    b"[1]\x00",
    nested(1020),  # RecursionError in json from any stack (orjson takes 1024 levels)
]
AGREE = [  # both agree here; kept so a change in either shows up
    b'{"a":1,"b":2,"a":3}',  # duplicate keys: the last value wins, in the first one's place
    b"-0",
    b"-0.0",
    b"1E+2",
    b"5e-324",
    b"1e-400",
    b"1.7976931348623157e308",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"18446744073709551615",
    b'"\\ud83d\\ude00\\u00e9\\/\\b\\f\\n\\r\\t"',
    b'"\x7f\xc3\xa9"',
    b" \t\n\r[ 1 , { } ] \r\n",
    nested(100, "{"),
]


def test_the_oracle_tells_types_order_and_signs_apart_at_any_depth() -> None:
    one: Any = 1
    other: Any = 1
    for _ in range(5000):  # deeper than the recursion limit, as json.loads gives from 3.12
        one, other = [one], [other]
    assert same(one, other) and same(math.nan, math.nan)
    assert not same([1], [1.0]) and not same([True], [1]) and not same(-0.0, 0.0)
    assert not same({"a": 1, "b": 2}, {"b": 2, "a": 1}) and not same([[1]], [[1, 2]])


@pytest.mark.parametrize("body", BIG + ACCEPTED_ONLY_BY_JSON + REFUSED_BY_JSON + AGREE)
def test_loads_is_json_loads_at_the_edges(body: bytes) -> None:
    loads_like_json(body)


def test_big_integers_stay_integers() -> None:
    assert loads(b"[18446744073709551616,-9223372036854775809]") == [2**64, -(2**63) - 1]
    assert all(type(v) is int for v in loads(b"[18446744073709551616,-9223372036854775809]"))


def test_a_review_with_a_big_integer_anywhere_decodes_like_json() -> None:
    raw = (FIXTURES / "pod-create.review.json").read_bytes()
    for k in range(9):  # every phase of the 9-byte sample
        doc = json.loads(raw)
        doc["request"]["object"]["metadata"]["x" * k] = 2**70
        loads_like_json(json.dumps(doc).encode())


def test_deep_review_is_refused_as_before() -> None:
    """The case RecursionError covered in review.parse: a pod without our annotations nested 1010
    deep (orjson accepts it, json.loads does not) is still HTTP 400."""
    body = json.dumps(review(pod())).encode().replace(b'"x"', b"[" * 1010 + b"]" * 1010, 1)
    try:
        json.loads(body)
    except RecursionError:  # Python 3.11; from 3.12 json's C recursion limit is 1500 or more
        out = reply(body, CACHE, SETTINGS)
        assert out.status == 400 and out.body == {"error": "body nests deeper than 64 levels"}
    else:
        assert reply(body, CACHE, SETTINGS).outcome == "untouched"


TEXT = st.text(st.characters(exclude_categories=()), max_size=12)  # surrogates and controls too
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**62, max_value=2**70)
    | st.floats()
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    value=VALUES,
    ascii_only=st.booleans(),
    indent=st.none() | st.integers(0, 2),
    encoding=st.sampled_from(["utf-8", "utf-8", "utf-8", "utf-16", "utf-32-le", "utf-8-sig"]),
)
def test_loads_matches_json_on_generated_documents(
    value: Any, ascii_only: bool, indent: int | None, encoding: str
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    loads_like_json(text.encode(encoding, "surrogatepass"))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=VALUES, data=st.data())
def test_loads_matches_json_on_damaged_documents(value: Any, data: st.DataObject) -> None:
    body = bytearray(
        json.dumps(value, ensure_ascii=data.draw(st.booleans())).encode("utf-8", "surrogatepass")
    )
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(body)))
        junk = data.draw(st.binary(max_size=2) | st.sampled_from([b"\\", b'"', b"-", b"e", b"0"]))
        body[at : at + data.draw(st.integers(0, 1))] = junk
    loads_like_json(bytes(body))


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=24))
def test_loads_matches_json_on_arbitrary_bytes(body: bytes) -> None:
    loads_like_json(body)


# ---- dumps: the cases where orjson alone differs from json's compact encoder ----
class Text(str):
    pass


class Count(int):
    pass


class Obj(dict[str, Any]):
    pass


class Reversed(dict[str, Any]):
    def items(self) -> Any:  # json's encoder asks a dict subclass for its items; orjson does not
        return reversed(list(super().items()))


class Colour(enum.IntEnum):
    RED = 1


@dataclasses.dataclass
class Point:
    x: int


def chain(depth: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(depth):
        out = [out]
    return out


DUMPS_EDGES = [
    "é",  # orjson writes non-ASCII and DEL raw, json escapes them
    "\x7f",
    "line\u2028sep",
    "😀",
    {"ключ": ["значение"]},
    "\ud800",  # lone surrogate: orjson refuses it
    2**64,  # beyond 64 bits: orjson refuses
    -(2**63) - 1,
    {1: "a"},  # non-string keys: orjson refuses, json converts
    {True: 1, None: 2, 1.5: 3},
    Text("x"),  # subclasses: refused with OPT_PASSTHROUGH_SUBCLASS, json's result
    Count(3),
    Obj(a=1),
    Reversed(a=1, b=2),
    Point(1),  # json refuses: so must dumps
    datetime.date(2026, 11, 22),
    object(),
    {"a": {1, 2}},
    chain(300),  # orjson stops at 255 levels
    chain(5000),  # json raises RecursionError
]
DUMPS_AGREE = [
    {"op": "add", "path": "/metadata/annotations/a~1b", "value": 'x"\\/\n\t\x00\x1f'},
    "".join(map(chr, range(0x7F))),
    [True, False, None, 0, -1, 2**63, 2**64 - 1, -(2**63)],
    (1, (2, "3")),
    Colour.RED,
]


@pytest.mark.parametrize("value", DUMPS_EDGES + DUMPS_AGREE)
def test_dumps_is_jsons_compact_encoding_at_the_edges(value: Any) -> None:
    dumps_like_json(value)


KEYS = TEXT | st.integers() | st.booleans() | st.none()
TREES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**62, max_value=2**70)
    | TEXT,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(TEXT, inner, max_size=4)
        | st.dictionaries(KEYS, inner, max_size=3)
    ),
    max_leaves=20,
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=TREES)
def test_dumps_matches_json_on_generated_trees(value: Any) -> None:
    dumps_like_json(value)


# ---- the webhook's own trees ----
JSON_TYPES = (dict, list, str, int, bool, type(None))


def json_typed(value: Any) -> bool:
    """Only the types dumps is exact for (no float, Enum, UUID, subclass)."""
    if type(value) is dict:
        return all(type(k) is str and json_typed(v) for k, v in value.items())
    if type(value) is list:
        return all(map(json_typed, value))
    return type(value) in JSON_TYPES


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=pods(), cache=caches(), tuning=st.booleans())
def test_patches_are_the_old_bytes(pod: dict[str, Any], cache: FabricCache, tuning: bool) -> None:
    try:
        req = requirements(pod, "ns", cache.claim)
    except Invalid:
        return
    ops = mutate(pod, req, cache.groups(), Settings(POLICY, tuning), in_place=True).ops
    assert json_typed(ops)
    assert dumps(ops) == OLD_PATCH(ops).encode()
    if ops:  # and the review's field: the standard library's base64 of those bytes (pybase64)
        assert (
            allowed("uid", ops, [])["patch"] == base64.b64encode(OLD_PATCH(ops).encode()).decode()
        )


def replies() -> list[bytes]:
    bodies = [p.read_bytes() for p in REVIEWS]
    annotations = [
        {"gpufabric.io/rdma": "required", "gpufabric.io/cufile": "preferred"},
        {"gpufabric.io/topology": "nvlínk"},  # denied, the value quoted: non-ASCII in the reply
        {"gpufabric.io/rdma-min-ports": "99"},  # admitted with a warning
        {},
    ]
    bodies += [json.dumps(review(pod(a))).encode() for a in annotations]
    return bodies


@pytest.mark.parametrize("body", replies())
def test_replies_are_jsons_compact_bytes_with_the_old_patch(body: bytes) -> None:
    out = reply(body, CACHE, SETTINGS)
    sent = dumps(out.body)
    assert json_typed(out.body)
    assert sent == OLD_PATCH(out.body).encode() and sent.isascii()
    # The same JSON value the old spaced encoder sent, patch bytes included.
    assert json.loads(sent) == json.loads(OLD_REPLY(copy.deepcopy(out.body)))
    response = out.body["response"]
    if "patch" in response:
        patch = base64.b64decode(response["patch"], validate=True)
        assert patch == OLD_PATCH(json.loads(patch)).encode()
