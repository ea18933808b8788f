"""The NVLink domain as the lowest group level, on the real placer path (fake API server): NVL72
racks of 18 trays x 4 GPUs (tests/nvl72.py)."""

from __future__ import annotations

from typing import Any

from tests.nvl72 import TRAYS, domain, racks_under_leaves, tray_name, tray_node
from tests.webhook.groups.fabric import fabric, gpu_pod
from tests.webhook.groups.fake_api import FakeApi, setup
from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.choose import NO_NVLINK
from webhook.groups.model.names import GATE
from webhook.groups.model.pods import parse_group
from webhook.groups.placer.placer import Placer

REQ = "requiredDuringSchedulingIgnoredDuringExecution"
PLACEMENT = "gpufabric.io/placement"


def member(i: int, size: int, **kw: Any) -> dict[str, Any]:
    return gpu_pod(f"w-{i:02d}", 4, group="moe", size=size, gated=True, **kw)


def arrive_all(api: FakeApi, placer: Placer, pods: list[dict[str, Any]]) -> None:
    for pod in pods:
        placer.pod_event("ADDED", api.create(pod))
        placer.reconcile()


def placements(api: FakeApi) -> set[str]:
    return {p["metadata"]["annotations"].get(PLACEMENT, "") for p in api.pods.values()}


def busy_trays(rack: int, trays: range) -> dict[str, int]:
    return {tray_name(rack, t): 4 for t in trays}


def test_four_pods_of_four_gpus_land_in_one_nvlink_domain() -> None:
    # Two racks, each its own leaf domain. Rack 0 has 5 free trays, rack 1 is empty: tightest
    # fit is rack 0, and the pods are held to it by the NVLink domain label.
    api, placer = setup(racks_under_leaves(2), busy_trays(0, range(13)))
    arrive_all(api, placer, [member(i, 4) for i in range(3)])
    assert api.patches == []  # gang: nothing before the last member exists
    arrive_all(api, placer, [member(3, 4)])
    assert len(api.patches) == 4
    for i in range(4):
        pod = api.get(f"w-{i:02d}")
        assert pod["spec"]["schedulingGates"] == []
        assert pod["metadata"]["annotations"][PLACEMENT] == f"nvlink-domain={domain(0)}"
        terms = pod["spec"]["affinity"]["nodeAffinity"][REQ]["nodeSelectorTerms"]
        assert terms == [
            {
                "matchExpressions": [
                    {"key": "gpufabric.io/nvlink-domain", "operator": "In", "values": [domain(0)]}
                ]
            }
        ]


def test_an_nvlink_domain_that_spans_two_leaf_domains_holds_a_group_no_leaf_holds() -> None:
    # One rack whose trays hang off two leaf domains (9 + 9): 12 trays fit no leaf, but the rack.
    nodes = [tray_node(0, t, leaf=f"leaf-{t // 9}", pair="pair-0", spine="s") for t in range(TRAYS)]
    api, placer = setup(nodes)
    arrive_all(api, placer, [member(i, 12) for i in range(12)])
    assert len(api.patches) == 12
    assert placements(api) == {f"nvlink-domain={domain(0)}"}


def test_auto_goes_to_the_network_levels_when_no_nvlink_domain_holds_the_group() -> None:
    # 20 trays: more than one rack (18), so the smallest network level that holds them: the pair.
    api, placer = setup(racks_under_leaves(4))
    arrive_all(api, placer, [member(i, 20) for i in range(20)])
    assert len(api.patches) == 20
    assert placements(api) == {"leaf-pair=pair-0"}


def test_auto_skips_the_nvlink_level_when_the_candidate_nodes_have_no_domain() -> None:
    # NVL72 racks beside HGX nodes; the pods select the HGX nodes only (8 GPUs, no domain).
    hgx = fabric(8, extra={"gpu": "h100"})
    for n in hgx:
        for k in ("leaf", "leaf-pair", "leaf-quad"):
            n["metadata"]["labels"][f"gpufabric.io/{k}"] = (
                f"hgx-{n['metadata']['labels'][f'gpufabric.io/{k}']}"
            )
    aff = {
        "nodeAffinity": {
            REQ: {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}
                ]
            }
        }
    }
    api, placer = setup(racks_under_leaves(1) + hgx)
    arrive_all(api, placer, [member(i, 2, affinity=aff) for i in range(2)])
    assert placements(api) == {"leaf=hgx-leaf-0"}


def test_required_auto_waits_for_a_busy_nvlink_domain_with_the_reason() -> None:
    api, placer = setup(racks_under_leaves(1), busy_trays(0, range(15)))
    arrive_all(api, placer, [member(i, 4) for i in range(4)])
    assert api.patches == []
    assert all(p["spec"]["schedulingGates"] == [{"name": GATE}] for p in api.pods.values())
    want = (
        "required group moe: no nvlink-domain has 16 free GPUs for 4 pods; "
        f"best: {domain(0)} with 12"
    )
    assert api.events[-1][1:] == ("GroupWaiting", want)


def test_nvlink_level_asked_where_no_node_has_a_domain_waits_explained_none_ungated() -> None:
    # An HGX cluster with network labels only: required nvlink-domain cannot be met anywhere.
    api, placer = setup(fabric(16))
    arrive_all(api, placer, [member(i, 4, level="nvlink-domain") for i in range(4)])
    assert api.patches == []
    assert all(p["spec"]["schedulingGates"] == [{"name": GATE}] for p in api.pods.values())
    assert {e[2] for e in api.events if e[1] == "GroupWaiting"} == {
        f"required group moe: {NO_NVLINK}"
    }
    assert placer.waiting[("team-a", "moe")] == f"required group moe: {NO_NVLINK}"


def test_preferred_nvlink_level_without_domains_goes_up_to_the_network_levels() -> None:
    api, placer = setup(fabric(16))
    arrive_all(
        api, placer, [member(i, 2, level="nvlink-domain", locality="preferred") for i in range(2)]
    )
    assert placements(api) == {"leaf=leaf-0"}


def test_recovery_returns_to_the_groups_nvlink_domain() -> None:
    api, placer = setup(racks_under_leaves(2), busy_trays(0, range(13)))
    arrive_all(api, placer, [member(i, 4) for i in range(4)])
    assert placements(api) == {f"nvlink-domain={domain(0)}"}
    # Member 2 fails and its controller recreates it: it goes back to rack 0, which has room.
    placer.pod_event("DELETED", api.pods.pop(("team-a", "w-02")))
    arrive_all(api, placer, [member(2, 4, uid="uid-new")])
    assert api.get("w-02")["metadata"]["annotations"][PLACEMENT] == f"nvlink-domain={domain(0)}"
    # Rack 0 fills up; the next replacement waits for it (required) instead of leaving the rack.
    for t in range(13, TRAYS):
        placer.pod_event(
            "ADDED",
            gpu_pod(f"x-{t}", 4, namespace="other", node_name=tray_name(0, t), phase="Running"),
        )
    placer.pod_event("DELETED", api.pods.pop(("team-a", "w-02")))
    arrive_all(api, placer, [member(2, 4, uid="uid-new-2")])
    assert api.get("w-02")["spec"]["schedulingGates"] == [{"name": GATE}]
    assert api.events[-1][2] == (
        f"required group moe: the group's nvlink-domain {domain(0)} has 0 usable free GPUs; "
        "1 new pods need 4"
    )


def test_lowest_domain_is_the_nvlink_domain_where_there_is_one_else_the_leaf() -> None:
    view = CapacityView()
    view.replace_nodes([*racks_under_leaves(1), *fabric(4)])
    assert view.lowest(tray_name(0, 3)) == ("nvlink-domain", domain(0))
    assert view.lowest("node-0001") == ("leaf", "leaf-0")
    assert view.lowest("unknown") is None
    assert view.levels() == ("nvlink-domain", "leaf", "leaf-pair", "leaf-quad", "spine")


def test_admission_accepts_the_nvlink_level_and_names_it_among_the_values() -> None:
    spec, problems = parse_group(
        {
            "gpufabric.io/group": "g",
            "gpufabric.io/group-size": "4",
            "gpufabric.io/group-level": "nvlink-domain",
        }
    )
    assert problems == [] and spec is not None and spec.level == "nvlink-domain"
    _, problems = parse_group(
        {
            "gpufabric.io/group": "g",
            "gpufabric.io/group-size": "4",
            "gpufabric.io/group-level": "rack",
        }
    )
    assert problems == [
        "gpufabric.io/group-level: 'rack' is not valid; accepted values: auto, nvlink-domain, "
        "leaf, leaf-pair, leaf-quad, spine"
    ]


def test_nvlink_domains_follow_the_fabric_order_of_their_leaves_not_their_uuids() -> None:
    # Two empty racks: equally tight, so the tie goes to fabric order, the rack under leaf-0,
    # whichever of the two UUIDs sorts first.
    first, second = sorted((0, 1), key=lambda r: domain(r))
    nodes = [tray_node(second, t, leaf="leaf-0", spine="s") for t in range(TRAYS)]
    nodes += [tray_node(first, t, leaf="leaf-1", spine="s") for t in range(TRAYS)]
    api, placer = setup(nodes)
    assert [d for d, _ in placer.view.index()["nvlink-domain"]] == [domain(second), domain(first)]
    arrive_all(api, placer, [member(i, 2) for i in range(2)])
    assert placements(api) == {f"nvlink-domain={domain(second)}"}
