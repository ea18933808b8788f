"""Hostile and odd AdmissionReviews (issue 11): every answer is HTTP 200 or 400 with a JSON body,
and no pod with gpufabric annotations is ever admitted without the constraints it asked for.

Bodies are the real review kube-apiserver sent (tests/fixtures/admission, see PROVENANCE.md) with
values of any JSON type put at any path, bodies nested thousands deep, and byte-level damage.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.webhook.helpers import POLICY, golden_cache, paths, put
from webhook.admission.placement import Settings, plan
from webhook.admission.requirements import requirements
from webhook.admission.review import has_fabric_annotations
from webhook.fleet.cache import FabricCache
from webhook.server.app import reply

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "admission"
RAW = (FIXTURES / "pod-create.review.json").read_bytes()
BASE: dict[str, Any] = json.loads(RAW)
CACHE = golden_cache()
SETTINGS = Settings(cufile_policy=POLICY, inject_nccl_tuning=True)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


ALL_PATHS = [p for p in paths(BASE) if p]
# The parts the webhook reads, more often: annotations, containers, affinity.
HOT = [
    p
    for p in ALL_PATHS
    if any(k in p for k in ("annotations", "containers", "affinity", "metadata", "spec"))
]


def check_answer(body: bytes, cache: FabricCache = CACHE) -> None:
    out = reply(body, cache, SETTINGS)
    assert out.status in (200, 400)
    assert out.outcome != "error", "answered by the last resort: a check is missing"
    json.dumps(out.body)  # a JSON body, whatever happened
    if out.status == 400:
        assert set(out.body) == {"error"}
        return
    resp = out.body["response"]
    try:
        pod = json.loads(body)["request"]["object"]
    except (KeyError, TypeError):
        return
    if not resp["allowed"] or not isinstance(pod, dict) or not has_fabric_annotations(pod):
        return
    # Admitted with gpufabric annotations: every requirement is in every required term.
    import base64

    import jsonpatch

    req = requirements(pod, "team-a", cache.claim)  # admitted, so valid
    patched = jsonpatch.apply_patch(pod, json.loads(base64.b64decode(resp.get("patch", "W10="))))
    terms = (
        patched["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]["nodeSelectorTerms"]
        if plan(req).required
        else []
    )
    for need in plan(req).required:
        assert all(need.expr in t.get("matchExpressions", []) for t in terms), need


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    changes=st.lists(
        st.tuples(st.sampled_from(ALL_PATHS) | st.sampled_from(HOT), JSON), min_size=1, max_size=4
    )
)
def test_values_of_any_type_anywhere(changes: list[tuple[tuple[Any, ...], Any]]) -> None:
    doc = copy.deepcopy(BASE)
    for path, value in changes:
        try:
            put(doc, path, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change removed the path
    check_answer(json.dumps(doc).encode())


ANNOTATION_VALUES = st.one_of(
    JSON,
    st.sampled_from(
        ["required", "preferred", "nvlink", "8", "-1", "9223372036854775808", "mlx5_0"]
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    annotations=st.dictionaries(
        st.sampled_from(
            [
                "gpufabric.io/rdma",
                "gpufabric.io/rdma-min-ports",
                "gpufabric.io/preferred-hcas",
                "gpufabric.io/cufile",
                "gpufabric.io/topology",
                "gpufabric.io/min-nvlink-bandwidth-gbps",
                "gpufabric.io/claim",
                "gpufabric.io/typo",
                "example.com/x",
            ]
        ),
        ANNOTATION_VALUES,
        max_size=5,
    ),
    gpus=JSON,
)
def test_odd_annotation_values_are_denied_or_constrained(
    annotations: dict[str, Any], gpus: Any
) -> None:
    doc = copy.deepcopy(BASE)
    doc["request"]["object"]["metadata"]["annotations"] = annotations
    doc["request"]["object"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = (
        gpus
    )
    check_answer(json.dumps(doc).encode())


@settings(max_examples=60, deadline=None)
@given(
    depth=st.integers(1, 5000), opener=st.sampled_from(["[", '{"a":']), where=st.sampled_from(HOT)
)
def test_deep_nesting_is_a_400_or_an_answer(
    depth: int, opener: str, where: tuple[Any, ...]
) -> None:
    closer = "]" if opener == "[" else "}"
    deep = json.loads(opener * min(depth, 60) + "1" + closer * min(depth, 60))
    doc = copy.deepcopy(BASE)
    put(doc, where, deep)
    check_answer(json.dumps(doc).encode())
    raw = (opener * depth + "1" + closer * depth).encode()
    check_answer(raw)
    check_answer(RAW[:-1] + b',"deep":' + raw + b"}")


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_byte_damage(data: st.DataObject) -> None:
    body = bytearray(RAW)
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(body) - 1))
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if op == "flip":
            body[pos] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del body[pos : pos + data.draw(st.integers(1, 40))]
        else:
            body[pos:pos] = data.draw(
                st.sampled_from([b"null", b"[]", b"{}", b'"x"', b"1e999", b"-1", b"\xff"])
            )
    check_answer(bytes(body))


def test_real_review_is_mutated_and_deeply_nested_review_is_400() -> None:
    out = reply(RAW, CACHE, SETTINGS)
    assert out.status == 200 and out.body["response"]["allowed"] is True
    assert "patch" in out.body["response"]
    deep = b"[" * 100_000 + b"]" * 100_000
    out = reply(deep, CACHE, SETTINGS)  # RecursionError in json.loads on the old code: a 500
    assert out.status == 400 and "nests deeper" in out.body["error"]
    doc = copy.deepcopy(BASE)
    doc["request"]["object"]["spec"]["containers"][0]["env"] = [{"name": "X", "value": "1"}] * 2
    nested: Any = "x"
    for _ in range(200):
        nested = {"a": nested}
    doc["request"]["object"]["spec"]["containers"][0]["args"] = [nested]
    out = reply(json.dumps(doc).encode(), CACHE, SETTINGS)
    assert out.status == 400


def test_wrong_types_in_a_fabric_pod_are_denied_naming_the_field() -> None:
    doc = copy.deepcopy(BASE)
    doc["request"]["object"]["spec"]["containers"][0]["env"] = {"NCCL_IB_HCA": "x"}  # not a list
    doc["request"]["object"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"] = "zone-a"
    doc["request"]["object"]["metadata"]["annotations"]["gpufabric.io/rdma-min-ports"] = 8
    out = reply(json.dumps(doc).encode(), CACHE, SETTINGS)
    assert out.status == 200
    resp = out.body["response"]
    assert resp["allowed"] is False and resp["status"]["code"] == 400
    message = resp["status"]["message"]
    assert "spec.containers[0].env is an object, not a list of objects" in message
    assert "nodeSelectorTerms is a string, not a list of objects" in message
    assert "gpufabric.io/rdma-min-ports: 8 is not a string" in message


def test_wrong_types_in_other_pods_leave_them_alone() -> None:
    doc = copy.deepcopy(BASE)
    doc["request"]["object"]["metadata"]["annotations"] = {"example.com/x": "1"}
    doc["request"]["object"]["spec"]["containers"] = "not a list"
    out = reply(json.dumps(doc).encode(), CACHE, SETTINGS)
    assert out.status == 200 and out.body["response"] == {
        "uid": BASE["request"]["uid"],
        "allowed": True,
    }
    doc["request"]["object"]["metadata"] = ["not", "a", "map"]
    out = reply(json.dumps(doc).encode(), CACHE, SETTINGS)
    assert out.status == 200 and out.body["response"]["allowed"] is True


def test_an_unexpected_failure_denies_fabric_pods_and_is_logged(
    monkeypatch: Any, caplog: Any
) -> None:
    import webhook.server.app as server

    def boom(*args: Any) -> Any:
        raise RuntimeError("unexpected\nforged line")

    monkeypatch.setattr(server, "admit", boom)
    out = reply(RAW, CACHE, SETTINGS)
    assert out.status == 200 and out.outcome == "error"
    resp = out.body["response"]
    assert resp["allowed"] is False and resp["status"]["code"] == 500
    assert any(r.exc_info for r in caplog.records if r.getMessage() == "admission failed")
    doc = copy.deepcopy(BASE)
    doc["request"]["object"]["metadata"]["annotations"] = {}
    out = reply(json.dumps(doc).encode(), CACHE, SETTINGS)
    assert out.body["response"]["allowed"] is True and "patch" not in out.body["response"]
