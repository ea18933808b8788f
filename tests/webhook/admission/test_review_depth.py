"""The nesting bound read from the review's text (webhook.admission.review.text_too_deep) agrees with the
walk of the decoded value (too_deep) on any JSON, strings full of quotes, backslashes and
brackets included, and a deep fabric review is a 400 in every encoding json.loads accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.admission import review as rv

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "admission"
BASE: dict[str, Any] = json.loads((FIXTURES / "pod-create.review.json").read_bytes())
TRICKY = st.text(alphabet='"\\[]{}/ab\n\u00e9\u2028', max_size=8)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TRICKY, inner, max_size=3),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(value=JSON, limit=st.integers(1, 8), ascii_only=st.booleans())
def test_text_bound_agrees_with_the_walk(value: Any, limit: int, ascii_only: bool) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert rv.text_too_deep(body, limit) == rv.too_deep(value, limit)


def _nested(depth: int) -> Any:
    value: Any = '"]}\\'
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-be", "utf-32"])
def test_deep_fabric_review_is_400_in_any_encoding(encoding: str) -> None:
    doc = json.loads(json.dumps(BASE))
    doc["request"]["object"]["metadata"]["annotations"]["gpufabric.io/topology"] = "nvlink"
    doc["request"]["object"]["spec"]["containers"][0]["args"] = [_nested(rv.MAX_DEPTH)]
    with pytest.raises(rv.BadReview, match="nests deeper"):
        rv.parse(json.dumps(doc).encode(encoding))
    doc["request"]["object"]["spec"]["containers"][0]["args"] = [_nested(rv.MAX_DEPTH - 10)]
    assert rv.parse(json.dumps(doc).encode(encoding))["uid"] == BASE["request"]["uid"]


def _chain(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("limit", [2, 3, 8, rv.MAX_DEPTH])
@pytest.mark.parametrize("over", [-1, 0, 1])
@pytest.mark.parametrize("siblings", [0, 3, 200])
def test_bound_is_exact_at_the_limit_however_many_brackets(
    limit: int, over: int, siblings: int
) -> None:
    # The passes stop once the brackets left cannot reach the limit: a chain exactly at the limit
    # is within it, one more level is not, with or without more brackets than the limit beside it
    # (shallow objects the first pass removes, or a second chain as deep as the first).
    depth = limit + over
    value = [_chain(depth - 1), *[{"k": "v"}] * siblings, *[_chain(depth - 1)] * (siblings > 3)]
    body = json.dumps(value).encode()
    assert rv.text_too_deep(body, limit) is (depth > limit)
    assert rv.too_deep(value, limit) is (depth > limit)


@pytest.mark.parametrize(
    "strings",
    [
        ['"[[[['],  # an escaped quote, then brackets: all inside the string
        ["\\", "[[[[", "]]]]"],  # a string ending in an escaped backslash, then its quote
        ['\\"[{[{'],  # an escaped backslash, an escaped quote, brackets
        ["[[[[", "}}}}"],  # brackets inside strings, no backslash anywhere
        ["\u00e9[[", '"]]'],
    ],
)
def test_brackets_inside_strings_do_not_count(strings: list[str]) -> None:
    value = [{"s": strings}]  # three levels, whatever the strings hold
    for ascii_only in (True, False):
        body = json.dumps(value, ensure_ascii=ascii_only).encode()
        for limit in (1, 2, 3):
            assert rv.text_too_deep(body, limit) is (limit < 3), (body, limit)


@pytest.mark.parametrize("escapes", [1, 31, 32, 33, 200])
def test_escaped_quotes_and_backslashes_however_many(escapes: int) -> None:
    # However many escapes (one pass reads them all, as JSON does): a string of escaped quotes
    # with brackets, then one ending in escaped backslashes.
    value = [{"s": ['"' * escapes + "[[[[", "]]" + "\\" * escapes, "{{"]}]
    body = json.dumps(value).encode()
    assert body.count(b"\\") >= 2 * escapes
    for limit in (1, 2, 3):
        assert rv.text_too_deep(body, limit) is (limit < 3), (body, limit)


@pytest.mark.parametrize(
    "body", [b"\\", b'{"a":1}\\', b"\\" * 40 + b"{", b'{"a":"\\', b'["\\"]', b"[" * 600 + b"\\"]
)
def test_escapes_in_text_that_is_not_json_are_read_as_json_errors(body: bytes) -> None:
    # The skeleton is taken before decoding, so it must read any bytes: a backslash at the very
    # end included. The answer is json.loads's own error, as for any other text.
    with pytest.raises(rv.BadReview, match="body is not JSON"):
        rv.parse(body)
