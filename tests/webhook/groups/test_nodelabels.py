"""The placer's per-Node labels: read like the dict of the same labels, stored once per pool."""

from __future__ import annotations

from webhook.groups.model.nodelabels import HOSTNAME, NodeLabels
from webhook.groups.model.objects import node_info
from webhook.groups.model.selector import selector_of


def _node(name: str, **labels: str) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": {HOSTNAME: name, "pool": "a", **labels}}}


def test_reads_like_the_dict_and_a_pool_shares_one() -> None:
    a, b = node_info(_node("n1")).labels, node_info(_node("n2")).labels
    assert a == {HOSTNAME: "n1", "pool": "a"} and dict(a) == {HOSTNAME: "n1", "pool": "a"}
    assert a.get(HOSTNAME) == "n1" and b[HOSTNAME] == "n2" and a.get("zone") is None
    assert len(a) == 2 and HOSTNAME in a and "zone" not in a and a != b
    assert a._rest is b._rest  # what the class is for: one dict per label set
    no_host = NodeLabels({"pool": "a"})
    assert no_host.get(HOSTNAME) is None and HOSTNAME not in no_host and no_host == {"pool": "a"}


def test_selectors_judge_it_as_the_dict() -> None:
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": HOSTNAME, "operator": "In", "values": ["n1"]}
                            ]
                        }
                    ]
                }
            }
        }
    }
    s = selector_of(spec)
    for name, ok in (("n1", True), ("n2", False)):
        info = node_info(_node(name))
        assert s.admits(name, info.labels) is ok
        assert s.admits(name, dict(info.labels)) is ok
