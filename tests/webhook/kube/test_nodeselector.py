"""NodeSelector semantics as kube-scheduler applies them (notes/k8s_placement.md §4.1, from
component-helpers nodeaffinity and apimachinery labels.Requirement)."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.kube import nodeselector as ns

LABELS = {
    "topology.kubernetes.io/zone": "zone-a",
    "gpufabric.io/rdma-ports": "8",
    "gpufabric.io/hca-profile": "a1b2c3",
    "odd": "07",
    "word": "eight",
}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


@pytest.mark.parametrize(
    ("e", "ok"),
    [
        (expr("topology.kubernetes.io/zone", "In", "zone-a", "zone-b"), True),
        (expr("topology.kubernetes.io/zone", "In", "zone-b"), False),
        (expr("missing", "In", "x"), False),
        (expr("topology.kubernetes.io/zone", "NotIn", "zone-b"), True),
        (expr("topology.kubernetes.io/zone", "NotIn", "zone-a"), False),
        (expr("missing", "NotIn", "x"), True),  # nodes without the label match NotIn
        (expr("missing", "Exists"), False),
        (expr("word", "Exists"), True),
        (expr("missing", "DoesNotExist"), True),
        (expr("word", "DoesNotExist"), False),
        (expr("gpufabric.io/rdma-ports", "Gt", "7"), True),
        (expr("gpufabric.io/rdma-ports", "Gt", "8"), False),  # strictly greater
        (expr("gpufabric.io/rdma-ports", "Lt", "9"), True),
        (expr("gpufabric.io/rdma-ports", "Lt", "8"), False),
        (expr("odd", "Gt", "6"), True),  # leading zeros parse (ParseInt)
        (expr("word", "Gt", "1"), False),  # a label that is not an integer never matches
        (expr("missing", "Lt", "100"), False),  # nor does a missing one
        (expr("gpufabric.io/rdma-ports", "Gt", "seven"), False),  # unparseable requirement
        (expr("gpufabric.io/rdma-ports", "Gt", "1", "2"), False),  # exactly one value
        (expr("gpufabric.io/rdma-ports", "Gt", "9223372036854775808"), False),  # beyond int64
        (expr("gpufabric.io/rdma-ports", "Gt", " 7"), False),  # ParseInt takes no spaces
        (expr("word", "In"), False),  # In needs values
        (expr("word", "Exists", "eight"), False),  # Exists takes none
        (expr("word", "Matches", "eight"), False),
    ],
)
def test_requirement_operators(e: dict[str, Any], ok: bool) -> None:
    assert ns.requirement(e, LABELS).ok is ok


def test_verdict_says_what_the_node_has() -> None:
    v = ns.requirement(expr("gpufabric.io/hca-profile", "In", "ffff"), LABELS)
    assert not v.ok
    assert v.why == "gpufabric.io/hca-profile In [ffff]: node has gpufabric.io/hca-profile=a1b2c3"
    assert "node has no label x" in ns.requirement(expr("x", "Exists"), LABELS).why


def test_terms_are_ored_and_expressions_anded() -> None:
    zone_b = {"matchExpressions": [expr("topology.kubernetes.io/zone", "In", "zone-b")]}
    both = {
        "matchExpressions": [
            expr("topology.kubernetes.io/zone", "In", "zone-a"),
            expr("gpufabric.io/rdma-ports", "Gt", "8"),
        ]
    }
    assert ns.terms([zone_b, both], LABELS)[0] is False
    ok, checked = ns.terms([zone_b, {"matchExpressions": both["matchExpressions"][:1]}], LABELS)
    assert ok and [v.ok for v in checked[0]] == [False]
    assert ns.terms([{}], LABELS)[0] is False  # an empty term matches no node
    assert ns.terms([], LABELS)[0] is False


def test_match_fields_node_name() -> None:
    t = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
    assert ns.terms([t], LABELS, "n1")[0] and not ns.terms([t], LABELS, "n2")[0]
    bad = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}
    assert not ns.terms([bad], LABELS, "a")[0]


def test_pod_admits_needs_node_selector_and_affinity() -> None:
    pod: dict[str, Any] = {"spec": {"nodeSelector": {"word": "eight"}}}
    assert ns.pod_admits(pod, LABELS)
    pod["spec"]["nodeSelector"] = {"word": "nine"}
    assert not ns.pod_admits(pod, LABELS)
    pod["spec"] = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [expr("missing", "Exists")]}]
                }
            }
        }
    }
    assert not ns.pod_admits(pod, LABELS)
    assert ns.pod_admits({"spec": {}}, LABELS)
    assert ns.pod_admits({}, LABELS)


@pytest.mark.parametrize(
    ("text", "value"),
    [("0", 0), ("-5", -5), ("+5", 5), ("007", 7), ("9223372036854775807", 2**63 - 1)],
)
def test_parse_int64_accepts_what_parseint_accepts(text: str, value: int) -> None:
    assert ns.parse_int64(text) == value


@pytest.mark.parametrize("text", ["", "1_000", " 1", "1.0", "0x10", "9223372036854775808", "٣"])
def test_parse_int64_refuses_the_rest(text: str) -> None:
    assert ns.parse_int64(text) is None
