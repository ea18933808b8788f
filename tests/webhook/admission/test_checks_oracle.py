"""The fast admission checks (webhook/admission/review.py pod_problems, webhook/admission/requirements.py check, with
its memo of the annotations' reading) answer exactly as the plain ones they replaced
(tests/webhook/check_oracle.py): the same Requirements and the same problems in the same order,
for the real review's pod with values of any type put anywhere the checks read."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.webhook import check_oracle as oracle
from tests.webhook.helpers import paths, put
from webhook.admission import requirements as rq
from webhook.admission.review import pod_problems

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "admission"
POD: dict[str, Any] = json.loads((FIXTURES / "pod-create.review.json").read_bytes())["request"][
    "object"
]
CLAIM = {
    "topology": {"mode": "nvlink", "minBandwidthGBps": 600},
    "network": {"rdmaRequired": True, "minPorts": 4, "preferredHcas": ["mlx5_0", "mlx5_1"]},
    "storage": {"cuFile": "Required"},
}
_REQ = ("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


# Every path of the real pod but its managedFields, and the fields the checks read that it lacks.
PATHS = [p for p in paths(POD) if p and "managedFields" not in p] + [
    ("metadata", "labels"),
    ("spec", "nodeSelector"),
    ("spec", "volumes"),
    ("spec", "schedulingGates"),
    ("spec", "containers", 0, "env"),
    ("spec", "containers", 1, "volumeMounts"),
    ("spec", "affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution"),
    (*_REQ, "nodeSelectorTerms", 0, "matchExpressions", 0, "values"),
]
SCALAR = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6)
)
JSON = st.recursive(
    SCALAR,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
# Right-looking shapes too, so the checks past the first wrong type are reached: requirements
# and near-requirements mixed in one list, terms holding such lists.
REQUIREMENT = st.fixed_dictionaries(
    {"key": st.text(max_size=4), "operator": st.sampled_from(["In", "Exists"])},
    optional={"values": st.lists(st.text(max_size=3), max_size=2) | JSON},
)
ITEMS = st.lists(
    REQUIREMENT
    | st.dictionaries(st.sampled_from(["key", "operator", "values", "name"]), JSON, max_size=3),
    max_size=3,
)
VALUE = (
    JSON
    | ITEMS
    | st.lists(st.fixed_dictionaries({}, optional={"matchExpressions": ITEMS | JSON}), max_size=3)
    | st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2)
)
KEYS = st.sampled_from(
    [*sorted(rq.KNOWN_ANNOTATIONS), "gpufabric.io/typo", "gpufabric.io/", "example.com/x"]
)
ANNOTATION_VALUE = (
    st.sampled_from(
        [
            "required",
            " Preferred ",
            "nvlink",
            "same-socket",
            "8",
            "0",
            "-1",
            "9223372036854775808",
            "mlx5_0, mlx5_1",
            "mlx5_0;x",
            "",
            "tp8-ib",
            "x" * 3000,
        ]
    )
    | JSON
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    changes=st.lists(st.tuples(st.sampled_from(PATHS), VALUE), max_size=4),
    annotations=st.none() | st.dictionaries(KEYS, ANNOTATION_VALUE, max_size=5),
    claim=st.sampled_from([None, CLAIM, {"network": {"minPorts": 0}}, "not a spec"]),
)
def test_checks_answer_as_the_plain_version(
    changes: list[tuple[tuple[Any, ...], Any]], annotations: dict[str, Any] | None, claim: Any
) -> None:
    pod = copy.deepcopy(POD)
    if annotations is not None:
        pod["metadata"]["annotations"] = annotations
    for path, value in changes:
        try:
            put(pod, path, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change removed the path

    def lookup(ns: str, name: str) -> Any:
        return claim if (ns, name) == ("team-a", "tp8-ib") else None

    expected = oracle.check(pod, "team-a", lookup)
    assert pod_problems(pod) == oracle.pod_problems(pod)
    assert rq.check(pod, "team-a", lookup) == expected
    assert rq.check(pod, "team-a", lookup) == expected  # a second time: from the memo


@pytest.mark.parametrize("value", [1, True, 1.0, [1], {"1": 1}, None])
def test_values_that_are_not_strings_are_named_as_they_are(value: Any) -> None:
    # The memo keeps only strings: 1, True and 1.0 are equal keys, and each has its own message.
    pod = copy.deepcopy(POD)
    for first in ("1", 1, True, 1.0):
        pod["metadata"]["annotations"] = {"gpufabric.io/rdma-min-ports": first}
        rq.check(pod, "team-a", lambda ns, n: None)
    pod["metadata"]["annotations"] = {"gpufabric.io/rdma-min-ports": value}
    req, problems = rq.check(pod, "team-a", lambda ns, n: None)
    assert req is None and problems == [f"gpufabric.io/rdma-min-ports: {value!r} is not a string"]


def test_long_annotation_values_are_read_but_not_kept() -> None:
    pod = copy.deepcopy(POD)
    pod["metadata"]["annotations"] = {"gpufabric.io/rdma": "required" + " " * 5000}
    before = rq._memo_inline.cache_info()
    req, problems = rq.check(pod, "team-a", lambda ns, n: None)
    assert req is not None and req.rdma == "required" and problems == []
    after = rq._memo_inline.cache_info()
    assert (after.hits, after.misses) == (before.hits, before.misses)


def test_each_expression_that_is_not_a_requirement_is_named() -> None:
    pod = copy.deepcopy(POD)
    good = {"key": "zone", "operator": "In", "values": ["a"]}
    put(pod, (*_REQ, "nodeSelectorTerms"), [{"matchExpressions": [good, {"key": "zone"}, good]}])
    assert pod_problems(pod) == [
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[1] is not a requirement {key, operator, values}"
    ]


def test_alike_pods_share_their_requirements_and_each_gpu_count_has_its_own() -> None:
    # The fixture's annotations (nvlink topology, RDMA required on 8 ports, 900 GB/s NVLink) and
    # HCAs no other test names, so this reading is new to the memo: the first GPU counts it sees
    # keep their Requirements, any count gets its own.
    pod = copy.deepcopy(POD)
    pod["metadata"]["annotations"]["gpufabric.io/preferred-hcas"] = "mlx5_7,mlx5_9"
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    for gpus in [8, 4, 8, *range(12), 4]:
        limits["nvidia.com/gpu"] = gpus
        req = rq.requirements(pod, "team-a", lambda ns, n: None)
        assert req == rq.Requirements(
            gpus=gpus,
            rdma="required",
            rdma_min_ports=8,
            preferred_hcas=("mlx5_7", "mlx5_9"),
            topology="nvlink",
            min_nvlink_bandwidth=900,
        )
        if gpus in (8, 4):
            assert rq.requirements(pod, "team-a", lambda ns, n: None) is req
