from __future__ import annotations

from typing import Any

import pytest

from webhook.groups.model.selector import selector_of


def _aff(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
                }
            }
        }
    }


def _e(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)}


# Expected verdicts follow shared/notes/k8s_placement.md 4.1 (kube-scheduler semantics).
CASES = [
    ("in-hit", _aff([_e("zone", "In", "a", "b")]), {"zone": "b"}, True),
    ("in-absent", _aff([_e("zone", "In", "a")]), {}, False),
    ("notin-absent-matches", _aff([_e("zone", "NotIn", "a")]), {}, True),
    ("notin-hit", _aff([_e("zone", "NotIn", "a")]), {"zone": "a"}, False),
    ("exists", _aff([_e("zone", "Exists")]), {"zone": ""}, True),
    ("doesnotexist", _aff([_e("zone", "DoesNotExist")]), {"zone": "a"}, False),
    ("doesnotexist-absent", _aff([_e("zone", "DoesNotExist")]), {}, True),
    ("gt-strict", _aff([_e("n", "Gt", "7")]), {"n": "7"}, False),
    ("gt", _aff([_e("n", "Gt", "7")]), {"n": "8"}, True),
    ("gt-leading-zero", _aff([_e("n", "Gt", "07")]), {"n": "010"}, True),
    ("gt-underscore-not-int", _aff([_e("n", "Gt", "1")]), {"n": "1_0"}, False),
    ("gt-non-integer-label", _aff([_e("n", "Gt", "1")]), {"n": "x"}, False),
    ("lt", _aff([_e("n", "Lt", "8")]), {"n": "-3"}, True),
    ("gt-unparseable-term", _aff([_e("n", "Gt", "abc")]), {"n": "5"}, False),
    ("gt-two-values", _aff([_e("n", "Gt", "1", "2")]), {"n": "5"}, False),
    ("terms-ored", _aff([_e("zone", "In", "a")], [_e("zone", "In", "b")]), {"zone": "b"}, True),
    (
        "bad-term-others-count",
        _aff([_e("n", "Gt", "x")], [_e("zone", "In", "b")]),
        {"zone": "b"},
        True,
    ),
    (
        "exprs-anded",
        _aff([_e("zone", "In", "a"), _e("rack", "Exists")]),
        {"zone": "a"},
        False,
    ),
    ("empty-term-matches-nothing", _aff([]), {"zone": "a"}, False),
    ("node-selector", {"nodeSelector": {"zone": "a"}}, {"zone": "b"}, False),
]


@pytest.mark.parametrize(
    ("spec", "labels", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_selector_matches_scheduler_semantics(
    spec: dict[str, Any], labels: dict[str, str], want: bool
) -> None:
    assert selector_of(spec).admits("node-1", labels) is want


def test_match_fields_on_name() -> None:
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["n1"]}
                            ]
                        }
                    ]
                }
            }
        }
    }
    assert selector_of(spec).admits("n1", {})
    assert not selector_of(spec).admits("n2", {})


def test_taints_need_tolerations() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    assert not selector_of({}).admits("n", {}, [taint])
    tol = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    assert selector_of(tol).admits("n", {}, [taint])
    wrong = {"tolerations": [{"key": "nvidia.com/gpu", "value": "absent"}]}
    assert not selector_of(wrong).admits("n", {}, [taint])
    assert selector_of({}).admits("n", {}, [{"key": "x", "effect": "PreferNoSchedule"}])
