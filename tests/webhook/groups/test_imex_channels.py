"""IMEX channels across groups from the placer's own state (a node has one channel; the driver's
node label comes late, at prepare, and never with IMEX as a host service), the wait for the
channel template, and the placer's finalizer that keeps a ComputeDomain until its last member is
gone. Fake API server, NVL72 racks of 18 trays x 4 GPUs."""

from __future__ import annotations

from typing import Any

from tests.nvl72 import domain, racks_under_leaves, tray_name
from tests.webhook.groups.fabric import gpu_pod
from tests.webhook.groups.fake_api import FakeApi
from tests.webhook.groups.imex_world import imex_setup, member, settle
from webhook.groups.decision.capacity import CapacityView
from webhook.groups.extensions.imex.channels import Channels
from webhook.groups.extensions.imex.names import CLAIM, FINALIZER, NODE_LABEL
from webhook.groups.model.selector import selector_of
from webhook.groups.placer.placer import Placer


def members(group: str, size: int, gpus: int = 1, **kw: Any) -> list[dict[str, Any]]:
    pods = []
    for i in range(size):
        pod = member(i, size, gpus, group=group, **kw)
        pod["metadata"] |= {"name": f"{group}-{i}", "uid": f"uid-{group}-{i}"}
        pods.append(pod)
    return pods


def create(api: FakeApi, placer: Placer, pods: list[dict[str, Any]]) -> None:
    """Pods created in one request burst: all arrive before the placer decides once (and
    again as their ComputeDomain's template comes)."""
    for pod in pods:
        placer.pod_event("ADDED", api.create(pod))
    settle(placer)


def nodes_of(placer: Placer, group: str) -> set[str]:
    return {
        node
        for uid, (node, _) in {**placer.view.promised, **placer.view.bound}.items()
        if uid.startswith(f"uid-{group}-")
    }


def bind(api: FakeApi, placer: Placer, group: str) -> None:
    """The scheduler binds the group's ungated members where they were promised (no label yet:
    the kubelet plugin has not prepared them)."""
    for (_, name), pod in api.pods.items():
        uid = pod["metadata"]["uid"]
        if name.startswith(f"{group}-") and uid in placer.view.promised:
            pod["spec"]["nodeName"] = placer.view.promised[uid][0]
            placer.pod_event("MODIFIED", pod)
    placer.reconcile()


def rack(node: str) -> str:
    return node.rsplit("-", 1)[0]


def test_channels_count_pods_per_node_and_name_the_holder() -> None:
    ch = Channels()
    assert ch.put("a", "n1", "ns/x") == {"n1"} and ch.holder("n1") == "ns/x"
    assert ch.put("b", "n1", "ns/x") == {"n1"}
    assert ch.put("a", "n2", "ns/x") == {"n1", "n2"}  # moved: the promise became a binding
    assert ch.holder("n1") == "ns/x" and ch.holder("n2") == "ns/x"
    ch.put("b", "", "")
    assert ch.holder("n1") == "" and ch.on == {"n2": {"ns/x": 1}}
    assert ch.reset() == {"n2"} and ch.holder("n2") == ""


def test_the_views_overlay_labels_nodes_for_selectors_and_the_objects_own_label_wins() -> None:
    view = CapacityView()
    view.replace_nodes(racks_under_leaves(1)[:2])
    a, b = tray_name(0, 0), tray_name(0, 1)
    free = {"key": NODE_LABEL, "operator": "DoesNotExist"}
    term = {"nodeSelectorTerms": [{"matchExpressions": [free]}]}
    req = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term}}}
    sel = selector_of(req)
    assert view.admitted(sel) == {a, b}
    generation = view.generation
    view.overlay(a, {NODE_LABEL: "ns/x"})
    assert view.admitted(sel) == {b} and view.generation > generation
    assert view.tally([sel]).sums[0] == {domain(0): 4}  # the tally follows
    view.overlay(a, {})
    assert view.admitted(sel) == {a, b}
    view.overlay(b, {NODE_LABEL: "ns/x"})
    view.replace_nodes(racks_under_leaves(1)[:2])  # a relist keeps what the placer knows
    assert view.admitted(sel) == {a}


def test_race_a_group_right_after_another_bound_takes_none_of_its_trays() -> None:
    # imex1 (12 x 1 GPU) bound on 12 trays of rack 0, each with 3 GPUs left and no label yet.
    # race (8 x 1 GPU) fits rack 0 by GPUs (tightest), but 6 of its trays have a free channel.
    api, _, placer = imex_setup(racks_under_leaves(2))
    create(api, placer, members("imex1", 12))
    bind(api, placer, "imex1")
    first = nodes_of(placer, "imex1")
    assert len(first) == 12 and {rack(n) for n in first} == {rack(tray_name(0, 0))}
    create(api, placer, members("race", 8))
    second = nodes_of(placer, "race")
    assert len(second) == 8 and not second & first
    assert {rack(n) for n in second} == {rack(tray_name(1, 0))}


def test_two_groups_created_in_one_request_get_disjoint_trays() -> None:
    # q1 and q2 (3 x 1 GPU each) decided in one reconcile: q1's promises hold its channels.
    api, _, placer = imex_setup(racks_under_leaves(1))
    create(api, placer, members("q1", 3) + members("q2", 3))
    q1, q2 = nodes_of(placer, "q1"), nodes_of(placer, "q2")
    assert len(q1) == 3 and len(q2) == 3 and not q1 & q2
    assert len(api.patches) == 6


def test_a_rack_short_of_free_channels_waits_counting_trays() -> None:
    api, _, placer = imex_setup(racks_under_leaves(1))
    create(api, placer, members("big", 15))
    create(api, placer, members("late", 4))  # 3 trays left with a free channel, 57 GPUs
    assert nodes_of(placer, "late") == set()
    said = placer.waiting[("team-a", "late")]
    assert "no nvlink-domain has 4 free trays for 4 pods, one a tray" in said
    assert said.endswith(f"best: {domain(0)} with 3 free trays")


def test_a_lone_pod_claiming_a_compute_domains_template_holds_its_nodes_channel() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(1))
    lone = gpu_pod("solo", 1, node_name=tray_name(0, 0), phase="Running")
    lone["spec"]["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": "solo-ch"}]
    placer.pod_event("ADDED", api.create(lone))  # bound before its ComputeDomain is listed
    placer.reconcile()
    placer.ext.imex.book.event("ADDED", domains.user_made("team-a", "solo-cd", "solo-ch"))
    create(api, placer, members("g", 17))
    assert tray_name(0, 0) not in nodes_of(placer, "g") and len(nodes_of(placer, "g")) == 17


def test_a_relisting_placer_counts_bound_and_promised_channels_again() -> None:
    api, _, placer = imex_setup(racks_under_leaves(1))
    create(api, placer, members("a", 6))
    bind(api, placer, "a")
    create(api, placer, members("b", 6))  # ungated, not bound
    placer.pods_listed(list(api.pods.values()))
    create(api, placer, members("c", 6))
    a, b, c = nodes_of(placer, "a"), nodes_of(placer, "b"), nodes_of(placer, "c")
    assert len(a | b | c) == 18


def test_a_group_is_ungated_only_once_the_controller_made_its_template() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(1))
    domains.lag = True
    create(api, placer, members("moe", 4))
    assert ("team-a", "moe") in domains.objects and api.patches == []
    said = placer.waiting[("team-a", "moe")]
    assert "waiting for NVIDIA's ComputeDomain controller to make ResourceClaimTemplate " in said
    assert "ComputeDomain moe asked for" in said and "moe-imex-channel for it" in said
    placer.retry_all()  # decided again before the template comes (the ComputeDomain's event)
    placer.reconcile()
    said = placer.waiting[("team-a", "moe")]
    assert "moe-imex-channel for ComputeDomain moe" in said and api.patches == []
    assert nodes_of(placer, "moe") == set()  # nothing promised while it waits
    domains.controller()  # the template's watch event
    placer.retry_all()
    placer.reconcile()
    assert len(api.patches) == 4 and len(nodes_of(placer, "moe")) == 4
    assert [v for v, _, _ in domains.log] == ["create"]  # made once


def test_a_template_of_an_earlier_compute_domain_of_the_name_does_not_count() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(1))
    domains.lag = True
    stale = {"metadata": {"namespace": "team-a", "name": "moe-imex-channel"}}
    stale["metadata"]["labels"] = {NODE_LABEL: "uid-of-the-deleted-one"}
    placer.ext.imex.templates.event("ADDED", stale)
    create(api, placer, members("moe", 2))
    assert api.patches == []


def test_the_compute_domain_is_held_by_the_placers_finalizer_and_sized_for_the_group() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(1))
    create(api, placer, members("moe", 5))
    cd = domains.objects[("team-a", "moe")]
    assert cd["metadata"]["finalizers"] == [FINALIZER] and domains.nodes == {"moe": 5}


def test_garbage_collected_with_the_job_it_stays_until_the_last_member_is_gone() -> None:
    api, domains, placer = imex_setup(racks_under_leaves(1))
    create(api, placer, members("moe", 2))
    cd = domains.objects[("team-a", "moe")]
    cd["metadata"]["finalizers"].append("resource.nvidia.com/computeDomain")  # the driver's
    cd["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"  # the Job's deletion
    placer.ext.imex.book.event("MODIFIED", cd)
    placer.reconcile()
    assert [v for v, _, _ in domains.log] == ["create"]  # members exist: held
    for name in ("moe-0", "moe-1"):
        placer.pod_event("DELETED", api.pods.pop(("team-a", name)))
        placer.reconcile()
    assert [v for v, _, _ in domains.log] == ["create", "release"]  # not deleted twice
    assert cd["metadata"]["finalizers"] == ["resource.nvidia.com/computeDomain"]


def test_only_a_change_of_declared_templates_makes_pods_be_resolved_again() -> None:
    _, domains, placer = imex_setup(racks_under_leaves(1))
    book = placer.ext.imex.book
    cd = domains.user_made("team-a", "mine", "my-channel")
    book.event("ADDED", cd)
    version = book.changes
    book.event("MODIFIED", {**cd, "status": {"status": "Ready"}})  # the controller's status
    assert book.changes == version
    book.event("DELETED", cd)
    assert book.changes > version


def test_a_finished_or_deleted_member_frees_its_trays_channel() -> None:
    api, _, placer = imex_setup(racks_under_leaves(1))
    create(api, placer, members("a", 18))
    bind(api, placer, "a")
    create(api, placer, members("b", 2))
    assert nodes_of(placer, "b") == set()  # every tray's channel is a's
    for (_, name), pod in list(api.pods.items()):
        if name == "a-0":
            pod["status"]["phase"] = "Succeeded"  # the kubelet unprepares its claim
            placer.pod_event("MODIFIED", pod)
        if name == "a-1":
            placer.pod_event("DELETED", api.pods.pop(("team-a", name)))
    settle(placer)
    assert len(nodes_of(placer, "b")) == 2
