"""Priority and preemption for groups (issue 23, DESIGN "Priority"): the issue's scenarios on the
fake API server, which answers Eviction as kube-apiserver does."""

from __future__ import annotations

import pytest

from tests.webhook.groups.fabric import gpu_pod
from tests.webhook.groups.fake_api import FakeApi
from tests.webhook.groups.preempt_world import (
    HIGH,
    LOW,
    evicted,
    full,
    group,
    leaf_of,
    leave,
    placement,
    prio,
)
from webhook.groups.placer.placer import Placer


def reasons(api: FakeApi, reason: str) -> list[tuple[str, str]]:
    return [(pod, text) for pod, r, text in api.events if r == reason]


@pytest.mark.parametrize("locality", ["required", "preferred"])
def test_full_cluster_high_group_preempts_one_leaf_and_is_placed_there(locality: str) -> None:
    api, placer = full()
    group(api, placer, "train", 4, HIGH, locality=locality)
    victims = evicted(api)
    assert len(victims) == 4 and len({leaf_of(v) for v in victims}) == 1  # one leaf, whole
    leaf = leaf_of(victims[0])
    for v in victims:  # the API server marked them, as for any eviction
        conditions = api.get(v, "batch")["status"]["conditions"]
        assert {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
        } in conditions
    assert sorted(p for p, _ in reasons(api, "Preempted")) == sorted(victims)
    preempting = reasons(api, "GroupPreempting")
    assert sorted(p for p, _ in preempting) == [f"train-{i}" for i in range(4)]
    assert f"in leaf {leaf}" in preempting[0][1] and "batch/" in preempting[0][1]
    assert all(placement(api, f"train-{i}") == "" for i in range(4))  # not before they leave
    placer.reconcile()
    assert len(evicted(api)) == 4  # a plan under way evicts nothing more
    leave(api, placer, victims)
    assert {placement(api, f"train-{i}") for i in range(4)} == {f"leaf={leaf}"}
    ranks = sorted(
        api.get(f"train-{i}")["metadata"]["annotations"]["gpufabric.io/rank"] for i in range(4)
    )
    assert ranks == ["0", "1", "2", "3"]  # ranks as for any group


def test_waiting_groups_go_highest_priority_first_then_oldest_never_by_name() -> None:
    api, placer = full(priority=2 * HIGH)  # nothing here may be preempted by either group
    group(api, placer, "aa-low", 4, LOW, created="2026-11-26T10:00:00Z")
    group(api, placer, "zz-high", 4, HIGH, created="2026-11-26T10:05:00Z")
    group(api, placer, "mm-high", 4, HIGH, created="2026-11-26T10:01:00Z")
    assert [k[1] for k, _ in placer.waiting_order()] == ["mm-high", "zz-high", "aa-low"]
    leave(api, placer, [f"run-{i:02d}" for i in range(4, 8)])  # leaf-1 frees
    assert {placement(api, f"mm-high-{i}") for i in range(4)} == {"leaf=leaf-1"}
    assert all(placement(api, f"{g}-{i}") == "" for g in ("aa-low", "zz-high") for i in range(4))
    assert evicted(api) == []


def test_a_starving_big_group_keeps_the_domain_that_fills_up_for_it() -> None:
    api, placer = full(priority=2 * HIGH)
    group(api, placer, "big", 16, HIGH, level="auto", created="2026-11-26T10:00:00Z")
    for i in range(16):  # quad-0 (= spine-0) frees node by node; a small low group comes each time
        leave(api, placer, [f"run-{i:02d}"])
        if i < 15:
            group(api, placer, f"small{i}", 2, LOW, level="auto")
            assert all(placement(api, f"small{i}-{j}") == "" for j in range(2))
    assert {placement(api, f"big-{i}") for i in range(16)} == {"leaf-quad=quad-0"}


def test_groups_of_lower_priority_stay_out_of_the_domain_freed_for_a_higher_one() -> None:
    api, placer = full()
    group(api, placer, "train", 4, HIGH)
    victims = evicted(api)
    leave(api, placer, victims[:2])  # half the leaf is free: a low group of 2 would fit there
    group(api, placer, "notebook", 2, LOW, level="auto")
    assert all(placement(api, f"notebook-{j}") == "" for j in range(2))
    leave(api, placer, victims[2:])
    assert {placement(api, f"train-{i}") for i in range(4)} == {f"leaf={leaf_of(victims[0])}"}


def test_a_dry_run_refusal_sends_the_group_to_the_next_leaf_before_any_eviction() -> None:
    api, placer = full()
    for i in range(4):  # leaf-0's pods are under a PDB the placer has not seen (no watch yet)
        api.pods[("batch", f"run-{i:02d}")]["metadata"]["labels"] = {"app": "db"}
    api.add_pdb("db", {"app": "db"}, 0)
    group(api, placer, "train", 4, HIGH)
    assert api.dry_runs[0] == ("run-00", 429)  # refused as a dry run: nothing went in leaf-0
    victims = evicted(api)
    assert len(victims) == 4 and {leaf_of(v) for v in victims} == {"leaf-1"}
    assert [n for n, _ in api.evictions] == victims  # no real eviction was refused
    leave(api, placer, victims)
    assert {placement(api, f"train-{i}") for i in range(4)} == {"leaf=leaf-1"}


def test_a_victim_already_gone_is_no_error() -> None:
    api, placer = full()
    del api.pods[("batch", "run-00")]  # deleted; the watch has not said so yet
    group(api, placer, "train", 4, HIGH)
    assert ("run-00", 404) in api.evictions and len(evicted(api)) == 3
    leave(api, placer, evicted(api))
    placer.pod_event(
        "DELETED", prio(gpu_pod("run-00", 8, namespace="batch", node_name="node-0000"), LOW)
    )
    placer.reconcile()
    assert {placement(api, f"train-{i}") for i in range(4)} == {"leaf=leaf-0"}


def test_a_victim_that_does_not_leave_is_reported_and_no_second_leaf_is_opened() -> None:
    api, placer = full()
    group(api, placer, "train", 4, HIGH)
    first = evicted(api)
    for name in first:  # terminating: the watch says so
        placer.pod_event("MODIFIED", api.get(name, "batch"))
    api.now = 30 + 30 + 1  # grace period (30 s default) + the bound: a finalizer holds them
    for _ in range(3):
        placer.retry_all()
        placer.reconcile()
    stalled = reasons(api, "GroupPreemptionStalled")
    assert len(stalled) == 4  # once per member, not once per reconcile
    assert f"leaf {leaf_of(first[0])}" in stalled[0][1] and "no other leaf" in stalled[0][1]
    assert evicted(api) == first  # nothing more evicted anywhere
    leave(api, placer, first)
    assert {placement(api, f"train-{i}") for i in range(4)} == {f"leaf={leaf_of(first[0])}"}


def test_never_and_equal_priority_preempt_nothing() -> None:
    api, placer = full()
    group(api, placer, "never", 4, HIGH, never=True)
    group(api, placer, "peer", 4, LOW)
    assert api.evictions == [] and api.patches == []
    assert "no leaf has 32 free GPUs" in placer.waiting[("team-a", "never")]


def test_members_with_different_priorities_are_invalid_and_nothing_moves() -> None:
    api, placer = full()
    for i in range(4):
        pod = gpu_pod(f"mix-{i}", 8, group="mix", size=4, level="leaf", gated=True)
        placer.pod_event("ADDED", api.create(prio(pod, HIGH if i else LOW, never=i == 3)))
    placer.reconcile()
    assert api.evictions == [] and api.patches == []
    invalid = reasons(api, "GroupInvalid")
    assert invalid and "mix-0: priority 100" in invalid[0][1]
    assert "mix-3: priority 1000000, preemptionPolicy Never" in invalid[0][1]


def test_a_gang_victim_is_evicted_whole() -> None:
    api, placer = full(nodes=8)  # two leaves
    for name in ("run-00", "run-04"):  # a placed low gang across both leaves
        obj = api.pods[("batch", name)]
        obj["metadata"]["annotations"] = {
            "gpufabric.io/group": "old",
            "gpufabric.io/group-size": "2",
            "gpufabric.io/group-locality": "preferred",
        }
        obj["metadata"]["labels"] = {"gpufabric.io/group": "old"}
        placer.pod_event("MODIFIED", obj)
    group(api, placer, "train", 4, HIGH)
    victims = evicted(api)
    assert "run-00" in victims and "run-04" in victims  # run-04 is in the other leaf
    leave(api, placer, victims)
    assert {placement(api, f"train-{i}") for i in range(4)} == {"leaf=leaf-0"}


def test_recovery_of_a_preempted_group_places_it_again_whole() -> None:
    api, placer = full()
    group(api, placer, "train", 4, HIGH)
    leave(api, placer, evicted(api))
    # The low job's controller recreates its pods gated, as a group: they wait whole.
    group(api, placer, "again", 4, LOW)
    assert all(placement(api, f"again-{i}") == "" for i in range(4))
    leave(api, placer, [f"train-{i}" for i in range(4)], namespace="team-a")
    assert len({placement(api, f"again-{i}") for i in range(4)}) == 1
    assert placement(api, "again-0").startswith("leaf=")


def test_placer_without_an_evictor_never_preempts() -> None:
    api = FakeApi()
    placer = Placer(api)
    assert placer.ext.preempt.evictor is None


def test_metrics_count_preemptions_and_waiting_groups_by_priority() -> None:
    from prometheus_client import generate_latest

    from webhook.server.gauges import publish
    from webhook.server.metrics import WebhookMetrics

    metrics = WebhookMetrics()
    api, placer = full(priority=2 * HIGH)
    group(api, placer, "stuck", 4, HIGH)  # nothing it may preempt: waits
    placer.metrics = metrics
    placer.ext.preempt.metrics = metrics
    for name in ("run-00", "run-01"):
        api.pods[("batch", name)]["spec"]["priority"] = LOW
        placer.pod_event("MODIFIED", api.pods[("batch", name)])
    group(api, placer, "train", 2, HIGH)  # preempts two pods, 16 GPUs
    group(api, placer, "notebook", 1, LOW)
    publish(metrics, placer)
    text = generate_latest(metrics.registry).decode()
    assert "gpufabric_group_preemptions_total 1.0" in text
    assert "gpufabric_group_preempted_pods_total 2.0" in text
    assert "gpufabric_group_preempted_gpus_total 16.0" in text
    assert 'gpufabric_group_waiting_by_priority{priority="1000000"} 2.0' in text
    assert 'gpufabric_group_waiting_by_priority{priority="100"} 1.0' in text


def test_slim_copies_keep_what_priority_and_preemption_read() -> None:
    from webhook.groups.model.records import pod_record
    from webhook.groups.placer.slim import slim_pod

    pod = prio(
        gpu_pod("w-0", 8, group="g", size=2, gated=True),
        HIGH,
        never=True,
        created="2026-11-26T10:00:00Z",
    )
    pod["spec"]["terminationGracePeriodSeconds"] = 90
    pod["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    slim = slim_pod(pod)
    assert slim["spec"]["priorityClassName"] == "high"  # for people to read
    assert "managedFields" not in slim["metadata"]
    full, small = pod_record(pod, 0.0), pod_record(slim, 0.0)
    assert (small.priority, small.never, small.created, small.grace) == (
        HIGH,
        True,
        "2026-11-26T10:00:00Z",
        90.0,
    )
    assert small == full


def test_a_lower_group_does_not_preempt_in_a_domain_held_for_a_higher_one() -> None:
    api, placer = full(nodes=8)  # two leaves, full of low pods
    group(api, placer, "train", 4, HIGH)
    first = evicted(api)
    for name in first:  # the victims are terminating: the watch says so
        placer.pod_event("MODIFIED", api.get(name, "batch"))
    group(api, placer, "mid", 4, 500)
    second = evicted(api)[4:]
    assert {leaf_of(v) for v in first} == {"leaf-0"} and {leaf_of(v) for v in second} == {"leaf-1"}
    leave(api, placer, first + second)
    assert {placement(api, f"train-{i}") for i in range(4)} == {"leaf=leaf-0"}
    assert {placement(api, f"mid-{i}") for i in range(4)} == {"leaf=leaf-1"}


def test_a_group_placed_after_waiting_lets_the_others_try_the_domain_it_held() -> None:
    """The domain a waiting group held against lower ones is theirs again once it is placed,
    whatever event placed it (here its own, not one that freed room)."""
    api, placer = full()
    leave(api, placer, ["run-00"])
    group(api, placer, "big", 3, HIGH, never=True)  # cannot preempt: holds leaf-0 (1 free)
    group(api, placer, "small", 1, LOW)
    assert placement(api, "small-0") == ""  # kept out of the leaf held for big
    for name in ("run-01", "run-02", "run-03"):  # leaf-0 empties with no event seen
        rec = placer.drop_pod(api.pods.pop(("batch", name))["metadata"]["uid"])
        assert rec is not None
        placer.view.delete_pod(rec.uid)
    placer.dirty = {("team-a", "big")}  # decided again on an event of its own
    placer.reconcile()
    assert {placement(api, f"big-{i}") for i in range(3)} == {"leaf=leaf-0"}
    placer.reconcile()
    assert placement(api, "small-0") == "leaf=leaf-0"  # the fourth node, no longer held
