"""Groups with an IMEX channel on the real placer path (fake API server, NVL72 racks of 18 trays x
4 GPUs): one NVLink domain, one member a node, nodes of other ComputeDomains skipped, the
ComputeDomain made before the first gate goes and deleted after the last member, never before."""

from __future__ import annotations

import copy
from typing import Any

from tests.nvl72 import domain, racks_under_leaves, tray_name
from tests.webhook.groups.fake_api import FakeApi
from tests.webhook.groups.imex_world import (
    JOB,
    FakeDomains,
    arrive,
    imex_setup,
    member,
    problems,
    update_problems,
)
from webhook.groups.extensions.imex.extension import ImexChannels
from webhook.groups.extensions.imex.names import NODE_LABEL
from webhook.groups.extensions.preempt.extension import Preemption
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.placer import Placer

PLACEMENT = "gpufabric.io/placement"


def promised_nodes(placer: Placer, size: int) -> list[str]:
    return [placer.view.promised[f"uid-team-a-w-{i:02d}"][0] for i in range(size)]


def placed(api: FakeApi) -> set[str]:
    return {p["metadata"]["annotations"].get(PLACEMENT, "") for p in api.pods.values()}


def events(api: FakeApi, reason: str) -> list[str]:
    return [text for _, why, text in api.events if why == reason]


def test_required_group_gets_its_compute_domain_before_the_first_gate_goes() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(4))
    arrive(api, placer, [member(i, 8) for i in range(7)])
    # asked for as its first members arrive, so that NVIDIA's controller makes the template
    # while the rest come (issue 38); no gate goes before the last member exists
    assert domains.log == [("create", "moe", 0)] and api.patches == []
    arrive(api, placer, [member(7, 8)])
    assert domains.log == [("create", "moe", 0)]  # made once, while no member was ungated
    assert len(api.patches) == 8
    cd = domains.objects[("team-a", "moe")]
    assert problems(cd) == []
    assert cd["spec"] == {"channel": {"resourceClaimTemplate": {"name": "moe-imex-channel"}}}
    assert cd["metadata"]["ownerReferences"] == [
        {"apiVersion": JOB[0], "kind": JOB[1], "name": JOB[2], "uid": JOB[3]}
    ]
    assert placed(api) == {f"nvlink-domain={domain(0)}"}
    nodes = promised_nodes(placer, 8)
    assert len(set(nodes)) == 8  # one member a node, though 4 one-GPU pods fit a tray
    text = events(api, "GroupPlaced")[0]
    assert text.endswith("; ComputeDomain moe (template moe-imex-channel)")


def test_a_plain_group_of_the_same_pods_packs_four_a_tray() -> None:
    api, _, placer = imex_setup(racks_under_leaves(4))
    arrive(api, placer, [member(i, 8, mode=None) for i in range(8)])
    assert len(set(promised_nodes(placer, 8))) == 2


def test_required_group_larger_than_any_rack_one_a_node_waits() -> None:
    # 19 one-GPU members fit one rack's 72 GPUs, but not its 18 trays one a node.
    api, domains, placer = imex_setup(racks_under_leaves(2))
    arrive(api, placer, [member(i, 19) for i in range(19)])
    assert api.patches == [] and domains.objects == {}
    said = placer.waiting[("team-a", "moe")]
    assert "no nvlink-domain has 19 free trays for 19 pods, one a tray" in said
    assert said.endswith(f"best: {domain(0)} with 18 free trays")  # trays, not its 72 GPUs


def test_required_overrides_group_level_and_locality() -> None:
    # group-level spine and locality preferred: compute-domain required still keeps one rack.
    api, _, placer = imex_setup(racks_under_leaves(2))
    arrive(api, placer, [member(i, 4, level="spine", locality="preferred") for i in range(4)])
    assert placed(api) == {f"nvlink-domain={domain(0)}"}


def other_domain_trays(rack: int, count: int) -> list[dict[str, Any]]:
    nodes = racks_under_leaves(2)
    for n in nodes:
        name = n["metadata"]["name"]
        if any(name == tray_name(rack, t) for t in range(count)):
            n["metadata"]["labels"][NODE_LABEL] = "uid-of-another-compute-domain"
    return nodes


def test_trays_of_another_compute_domain_are_skipped() -> None:
    # Rack 0 is the tighter fit (one GPU busy on each of its 10 labelled trays), but only 8 of
    # its trays are free of another ComputeDomain: 9 members go to rack 1.
    busy = {tray_name(0, t): 1 for t in range(10)}
    api, _, placer = imex_setup(other_domain_trays(0, 10), busy)
    arrive(api, placer, [member(i, 9) for i in range(9)])
    assert placed(api) == {f"nvlink-domain={domain(1)}"}
    api, _, placer = imex_setup(other_domain_trays(0, 10), busy)
    arrive(api, placer, [member(i, 8) for i in range(8)])
    assert placed(api) == {f"nvlink-domain={domain(0)}"}
    assert not {tray_name(0, t) for t in range(10)} & set(promised_nodes(placer, 8))


def delete(api: FakeApi, placer: Placer, name: str) -> None:
    pod = api.pods.pop(("team-a", name))
    placer.pod_event("DELETED", pod)
    placer.reconcile()


def test_compute_domain_is_deleted_after_the_last_member_and_never_before() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(2))
    arrive(api, placer, [member(i, 3) for i in range(3)])
    for name in ("w-00", "w-01"):
        delete(api, placer, name)
        assert ("team-a", "moe") in domains.objects
    delete(api, placer, "w-02")
    assert domains.objects == {}
    assert [verb for verb, _, _ in domains.log] == ["create", "release", "delete"]


def restarted(api: FakeApi, domains: FakeDomains, nodes: list[dict[str, Any]]) -> Placer:
    imex = ImexChannels(domains)
    placer = Placer(api, extensions=Extensions(Preemption(api), imex))
    imex.book.listed(list(domains.objects.values()))  # the ComputeDomain list may come first
    before = dict(domains.objects)
    placer.reconcile()
    assert domains.objects == before  # before the pods are listed nothing is deleted
    placer.nodes_listed(nodes)
    placer.pods_listed(list(api.pods.values()))
    placer.reconcile()
    return placer


def test_a_restarted_placer_keeps_a_running_groups_domain_and_deletes_a_left_over_one() -> None:
    nodes = racks_under_leaves(2)
    api, domains, placer = imex_setup(nodes)
    arrive(api, placer, [member(i, 2) for i in range(2)])
    for pod in api.pods.values():  # bound and running when the placer restarts
        pod["spec"]["nodeName"] = tray_name(0, int(pod["metadata"]["name"][-1]))
        pod["status"]["phase"] = "Running"
    restarted(api, domains, nodes)
    assert ("team-a", "moe") in domains.objects
    api.pods.clear()  # the Job's pods went while no placer ran
    restarted(api, domains, nodes)
    assert domains.objects == {}


def test_preferred_group_no_rack_holds_spans_racks_and_says_so() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(4))
    arrive(api, placer, [member(i, 20, mode="preferred") for i in range(20)])
    assert len(api.patches) == 20
    assert placed(api) == {"leaf-pair=pair-0"}
    assert len(set(promised_nodes(placer, 20))) == 20
    assert "spans 2 NVLink domains, each forms its own IMEX domain" in events(api, "GroupPlaced")[0]
    assert ("team-a", "moe") in domains.objects


def test_user_made_compute_domain_members_are_placed_as_required_and_it_is_left_alone() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(2))
    placer.ext.imex.book.event("ADDED", domains.user_made("team-a", "my-cd", "my-channel"))
    pods = [member(i, 4, mode=None, template="my-channel", level="spine") for i in range(4)]
    arrive(api, placer, pods)
    assert placed(api) == {f"nvlink-domain={domain(0)}"}
    assert len(set(promised_nodes(placer, 4))) == 4
    assert [verb for verb, _, _ in domains.log] == []  # nothing made
    for i in range(4):
        delete(api, placer, f"w-{i:02d}")
    assert ("team-a", "my-cd") in domains.objects  # nor deleted


def test_required_waits_where_the_crd_is_not_served_and_preferred_is_a_plain_group() -> None:
    api, _, placer = imex_setup(racks_under_leaves(2), served=False)
    arrive(api, placer, [member(i, 2) for i in range(2)])
    assert api.patches == []
    assert placer.waiting[("team-a", "moe")] == (
        "group moe: compute-domain required: this cluster does not serve "
        "computedomains.resource.nvidia.com"
    )
    api, _, placer = imex_setup(racks_under_leaves(2), served=False)
    pods = [member(i, 2, mode="preferred", owner=None) for i in range(2)]
    for p in pods:  # nothing was injected at CREATE
        del p["spec"]["resourceClaims"], p["spec"]["containers"][0]["resources"]["claims"]
    arrive(api, placer, pods)
    assert len(api.patches) == 2


def test_a_compute_domain_of_the_groups_name_that_is_not_its_own_blocks_it() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(2))
    placer.ext.imex.book.event("ADDED", domains.user_made("team-a", "moe", "something-else"))
    arrive(api, placer, [member(i, 2) for i in range(2)])
    assert api.patches == []
    assert (
        "ComputeDomain moe exists in team-a and is not this group's"
        in (placer.waiting[("team-a", "moe")])
    )


def test_the_crd_refuses_a_changed_spec_and_a_missing_template() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(1))
    arrive(api, placer, [member(0, 1)])
    cd = domains.objects[("team-a", "moe")]
    changed = {**cd, "spec": {"channel": {"resourceClaimTemplate": {"name": "other"}}}}
    assert update_problems(cd, changed) == ["A computeDomain.spec is immutable"]
    assert update_problems(cd, cd) == []
    missing = {**cd, "spec": {"channel": {}}}
    assert problems(missing) == ["'resourceClaimTemplate' is a required property"]


def test_members_of_one_group_without_a_shared_controller_give_no_owner() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(1))
    pods = [member(0, 2), member(1, 2, owner=("batch/v1", "Job", "b", "uid-b"))]
    arrive(api, placer, pods)
    assert "ownerReferences" not in domains.objects[("team-a", "moe")]["metadata"]


def test_explain_shows_the_compute_domain_and_the_racks_that_hold_it_one_a_node() -> None:
    from tests.webhook.groups.fabric import gpu_pod
    from webhook.groups.placer.explain import group_section

    nodes = other_domain_trays(1, 10) + racks_under_leaves(3)[2 * 18 :]  # rack 1: 8 trays left
    full = [tray_name(2, t) for t in range(5)]  # rack 2: 13 trays free
    pods = [gpu_pod(f"b-{n}", 4, namespace="x", node_name=n, phase="Running") for n in full]
    lines = group_section(member(0, 12), nodes, pods)
    assert lines[2:4] == [
        "  IMEX channel (required): ComputeDomain moe, template moe-imex-channel; one member a "
        "node, none on a node of another ComputeDomain",
        f"  NVLink domains that hold it one member a node now: 2 of 3 ({domain(0)}, {domain(2)})",
    ]
    assert lines[-3] == f"  decision: nvlink-domain={domain(2)}"  # the tighter of the two


def test_a_replacement_member_goes_to_a_tray_none_of_its_group_is_on() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(1))
    arrive(api, placer, [member(i, 3) for i in range(3)])
    nodes = promised_nodes(placer, 3)
    for i, pod in enumerate(sorted(api.pods.values(), key=lambda p: p["metadata"]["name"])):
        pod["spec"]["nodeName"], pod["status"]["phase"] = nodes[i], "Running"  # bound: 3 free
        placer.pod_event("MODIFIED", copy.deepcopy(pod))
    delete(api, placer, "w-01")
    again = member(1, 3, uid="uid-team-a-w-01-again")
    arrive(api, placer, [again])
    assert api.get("w-01")["spec"]["schedulingGates"] == []  # placed again, in the same rack
    node = placer.view.promised["uid-team-a-w-01-again"][0]
    assert node not in {nodes[0], nodes[2]}  # though those trays are the tightest fit
    assert [verb for verb, _, _ in domains.log] == ["create"]  # the same ComputeDomain


def test_members_of_one_jobset_give_the_jobset_as_owner() -> None:
    # Each replicated Job's pods have that Job as controller; the JobSet labels them all.
    api, domains, placer = imex_setup(racks_under_leaves(1))
    pods = [member(i, 2, owner=("batch/v1", "Job", f"js-w-{i}", f"uid-{i}")) for i in range(2)]
    for p in pods:
        p["metadata"]["labels"] |= {
            "jobset.sigs.k8s.io/jobset-name": "js",
            "jobset.sigs.k8s.io/jobset-uid": "uid-js",
        }
    arrive(api, placer, pods)
    assert domains.objects[("team-a", "moe")]["metadata"]["ownerReferences"] == [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "uid-js"}
    ]


class Counted:
    def __init__(self) -> None:
        self.made, self.deleted, self.left = 0, 0, [0]

    def domain_made(self, created: int, deleted: int) -> None:
        self.made += created
        self.deleted += deleted

    def domains_left_over(self, count: int) -> None:
        self.left.append(count)


def test_metrics_count_made_deleted_and_left_over_domains() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(1))
    placer.ext.imex.metrics = metrics = Counted()
    arrive(api, placer, [member(0, 1)])
    domains.refuse_delete = True
    delete(api, placer, "w-00")
    assert (metrics.made, metrics.deleted, metrics.left[-1]) == (1, 0, 1)  # left over
    domains.refuse_delete = False
    placer.reconcile()  # retried on the next reconcile
    assert (metrics.deleted, domains.objects) == (1, {})
    placer.ext.imex.book.event("DELETED", {"metadata": {"name": "moe", "namespace": "team-a"}})
    placer.reconcile()
    assert metrics.left[-1] == 0  # gone once the watch says so


def test_a_users_compute_domain_that_declares_the_groups_template_name_is_the_users() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(2))
    placer.ext.imex.book.event("ADDED", domains.user_made("team-a", "mine", "moe-imex-channel"))
    arrive(api, placer, [member(i, 4, mode=None, template="moe-imex-channel") for i in range(4)])
    assert len(set(promised_nodes(placer, 4))) == 4  # one a tray: placed as required
    assert domains.log == []  # nothing made
    assert "ComputeDomain mine (template moe-imex-channel)" in events(api, "GroupPlaced")[0]
