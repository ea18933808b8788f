"""The placer against recorded watch sequences (pods and nodes as the API server sends them)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests import reference
from tests.webhook.groups.fabric import fabric, gpu_pod, node
from tests.webhook.groups.fake_api import FakeApi, gated_update_problems, setup
from webhook.groups.model.names import GATE
from webhook.groups.placer.placer import Placer
from webhook.groups.placer.said import INCOMPLETE_AFTER

REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def arrive(api: FakeApi, placer: Placer, pod: dict[str, Any]) -> None:
    placer.pod_event("ADDED", api.create(pod))
    placer.reconcile()


def feed_back(api: FakeApi, placer: Placer) -> None:
    """The watch reports the patched pods (MODIFIED), as the real one would."""
    for _, obj in sorted(api.pods.items()):
        placer.pod_event("MODIFIED", obj)
    placer.reconcile()


def member(i: int, group: str = "llama", size: int = 16, **kw: Any) -> dict[str, Any]:
    return gpu_pod(f"{group}-{i:02d}", 8, group=group, size=size, gated=True, **kw)


def domain_of(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return pod["spec"]["affinity"]["nodeAffinity"][REQ]["nodeSelectorTerms"]


def test_sixteen_pods_out_of_order_land_in_one_leaf_quad_only_when_all_exist() -> None:
    # 64 nodes, leaf-quad = 16 nodes; quad-0 has one busy node, so quad-1 is the fit.
    api, placer = setup(fabric(64), {"node-0003": 8})
    order = list(range(16))
    random.Random(7).shuffle(order)
    for n, i in enumerate(order):
        arrive(api, placer, member(i))
        if n < 15:
            assert api.patches == []  # gang: nothing before the last member exists
    assert len(api.patches) == 16 and len({name for name, _ in api.patches}) == 16
    for i in range(16):
        pod = api.get(f"llama-{i:02d}")
        assert pod["spec"]["schedulingGates"] == []
        assert pod["metadata"]["annotations"]["gpufabric.io/placement"] == "leaf-quad=quad-1"
        # plain pods: ranks in name order, four per leaf, leaves in fabric order
        assert pod["metadata"]["annotations"]["gpufabric.io/rank"] == str(i)
        assert domain_of(pod) == [
            {
                "matchExpressions": [
                    {"key": "gpufabric.io/leaf-quad", "operator": "In", "values": ["quad-1"]},
                    {
                        "key": "gpufabric.io/leaf",
                        "operator": "In",
                        "values": [f"leaf-{4 + i // 4}"],
                    },
                ]
            }
        ]
    feed_back(api, placer)
    assert len(api.patches) == 16  # nothing placed twice


def test_own_affinity_terms_each_get_the_domain_appended() -> None:
    aff = {
        "nodeAffinity": {
            REQ: {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "NotIn", "values": ["node-0000"]}
                        ]
                    },
                ]
            }
        },
        "podAntiAffinity": {},
    }
    api, placer = setup(fabric(8))
    for i in range(2):
        arrive(api, placer, member(i, size=2, affinity=aff))
    pod = api.get("llama-00")
    leaf = {"key": "gpufabric.io/leaf", "operator": "In", "values": ["leaf-0"]}
    assert domain_of(pod) == [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}, leaf]},
        {
            "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-0000"]}],
            "matchExpressions": [leaf],
        },
    ]


def test_member_deleted_before_placement_holds_the_group() -> None:
    api, placer = setup(fabric(8), clocked=True)
    for i in range(3):
        arrive(api, placer, member(i, size=4))
    gone = api.pods.pop(("team-a", "llama-02"))
    placer.pod_event("DELETED", gone)
    placer.reconcile()
    arrive(api, placer, member(3, size=4))
    assert api.patches == [] and api.events == []  # told only once it has waited a while
    assert placer.waiting[("team-a", "llama")] == "waiting for members: 3 of 4 exist"
    api.now += INCOMPLETE_AFTER
    placer.reconcile()
    api.now += INCOMPLETE_AFTER
    placer.reconcile()
    # One Event, in the words of then, on the members there are (not repeated while so)
    want = "waiting for members: 3 of 4 exist"
    assert api.events == [(f"llama-0{i}", "GroupIncomplete", want) for i in (0, 1, 3)]
    arrive(api, placer, member(2, size=4, uid="uid-recreated"))
    assert sorted(n for n, _ in api.patches) == ["llama-00", "llama-01", "llama-02", "llama-03"]


def test_a_group_whose_members_all_come_within_the_moment_is_told_nothing_of_the_wait() -> None:
    # A burst's groups each wait for their members a moment; an Event each would be a write
    # beside the burst's on a busy API server, read by no one once the group is placed
    api, placer = setup(fabric(8), clocked=True)
    for i in range(4):
        arrive(api, placer, member(i, size=4))
        api.now += INCOMPLETE_AFTER / 5
    assert len(api.patches) == 4
    api.now += 2 * INCOMPLETE_AFTER
    placer.reconcile()
    assert [e for e in api.events if e[1] == "GroupIncomplete"] == []


def test_group_that_cannot_fit_stays_gated_with_an_explanation() -> None:
    api, placer = setup(fabric(32), {f"node-{i:04d}": 8 for i in (0, 1, 9, 16, 17, 24, 25)})
    for i in range(8):
        arrive(api, placer, member(i, size=8))
    assert api.patches == []
    assert all(p["spec"]["schedulingGates"] == [{"name": GATE}] for p in api.pods.values())
    want = "required group llama: no leaf-pair has 64 free GPUs for 8 pods; best: pair-1 with 56"
    assert {(n, m) for n, r, m in api.events[-8:]} == {(f"llama-{i:02d}", want) for i in range(8)}
    n_events = len(api.events)
    placer.node_event("MODIFIED", node(3))  # an unchanged heartbeat: no new decision, no new Event
    placer.reconcile()
    assert len(api.events) == n_events
    # The busy pods of pair-0 finish: pair-0 has room now and the group goes there.
    for n in ("node-0000", "node-0001"):
        placer.pod_event("DELETED", gpu_pod(f"busy-{n}", namespace="other", node_name=n))
    placer.reconcile()
    assert len(api.patches) == 8
    assert (
        api.get("llama-00")["metadata"]["annotations"]["gpufabric.io/placement"]
        == "leaf-pair=pair-0"
    )


def test_two_groups_are_never_promised_the_same_gpus() -> None:
    # One leaf of 4 empty nodes and one with 2: group a (2 pods) takes the tight leaf-1, group b
    # (2 pods) cannot take it again before anything binds, so it gets leaf-0.
    api, placer = setup(fabric(8), {"node-0004": 8, "node-0005": 8})
    for g in ("a", "b"):
        for i in range(2):
            arrive(api, placer, member(i, group=g, size=2))
    got = {
        name: api.get(name)["metadata"]["annotations"]["gpufabric.io/placement"]
        for name, _ in api.patches
    }
    assert got == {
        "a-00": "leaf=leaf-1",
        "a-01": "leaf=leaf-1",
        "b-00": "leaf=leaf-0",
        "b-01": "leaf=leaf-0",
    }


def test_restart_mid_group_places_the_rest_once_in_the_recorded_domain() -> None:
    api, placer = setup(fabric(16))
    api.fail_after = 3  # the placer dies while patching the 4th member
    for i in range(7):
        arrive(api, placer, member(i, size=8))
    with pytest.raises(KeyboardInterrupt):
        arrive(api, placer, member(7, size=8))
    assert len(api.patches) == 3
    api.fail_after = None
    fresh = Placer(api)
    fresh.nodes_listed(fabric(16))
    fresh.pods_listed(list(api.pods.values()))
    fresh.reconcile()
    names = [n for n, _ in api.patches]
    assert sorted(names) == [f"llama-{i:02d}" for i in range(8)]  # each exactly once
    assert {p["metadata"]["annotations"]["gpufabric.io/placement"] for p in api.pods.values()} == {
        "leaf-pair=pair-0"
    }
    assert all(p["spec"]["schedulingGates"] == [] for p in api.pods.values())


def test_recovery_goes_to_the_recorded_domain_and_waits_when_it_lost_a_node() -> None:
    api, placer = setup(fabric(16))
    for i in range(2):
        arrive(api, placer, member(i, size=2))
    assert api.get("llama-00")["metadata"]["annotations"]["gpufabric.io/placement"] == "leaf=leaf-0"
    # Both bind; then member 1's node goes away and the Job recreates it.
    for i, n in ((0, "node-0000"), (1, "node-0001")):
        pod = api.get(f"llama-{i:02d}")
        pod["spec"]["nodeName"], pod["status"]["phase"] = n, "Running"
        api.pods[("team-a", f"llama-{i:02d}")] = pod
        placer.pod_event("MODIFIED", pod)
    placer.node_event("DELETED", node(1))
    placer.pod_event("DELETED", api.pods.pop(("team-a", "llama-01")))
    arrive(api, placer, member(1, size=2, uid="uid-new-1"))
    assert api.get("llama-01")["metadata"]["annotations"]["gpufabric.io/placement"] == "leaf=leaf-0"
    # leaf-0 fills up (other work lands on its last 2 nodes): a second replacement waits.
    for n in ("node-0002", "node-0003"):
        placer.pod_event(
            "ADDED", gpu_pod(f"x-{n}", 8, namespace="other", node_name=n, phase="Running")
        )
    placer.pod_event("DELETED", api.pods.pop(("team-a", "llama-01")))
    arrive(api, placer, member(1, size=2, uid="uid-new-2"))
    assert api.get("llama-01")["spec"]["schedulingGates"] == [{"name": GATE}]
    assert api.events[-1][2] == (
        "required group llama: the group's leaf leaf-0 has 0 usable free GPUs; 1 new pods need 8"
    )


def test_kueue_pods_are_ignored() -> None:
    api, placer = setup(fabric(8))
    for i in range(2):
        p = member(i, size=2)
        p["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "q"
        arrive(api, placer, p)
    assert api.patches == [] and api.events == []


def test_fake_refuses_what_the_api_server_refuses() -> None:
    gated = member(
        0,
        affinity={
            "nodeAffinity": {
                REQ: {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "a", "operator": "Exists"}]}
                    ]
                }
            }
        },
    )
    loosened = {
        **gated,
        "spec": {
            **gated["spec"],
            "affinity": {"nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": []}]}}},
        },
    }
    assert gated_update_problems(gated, loosened) == ["matchExpressions: only additions"]
    ungated = {**gated, "spec": {**gated["spec"], "schedulingGates": []}}
    tightened = {**ungated, "spec": {**ungated["spec"], "affinity": {}}}
    assert gated_update_problems(ungated, tightened) == [
        "spec.affinity: immutable once the pod is not gated"
    ]


def test_slim_copies_decide_like_the_full_objects() -> None:
    # A pod exactly as the real Job controller created it (reference/k8s-wire/admission/
    # pod-job-generatename.json, kube-controller-manager v1.36.2), named and grouped.
    import json

    from webhook.groups.model.records import pod_record
    from webhook.groups.placer.slim import slim_node, slim_pod

    pod = json.loads((reference.WIRE / "admission" / "pod-job-generatename.json").read_text())[
        "received"
    ]["body"]["request"]["object"]
    pod["metadata"] |= {"name": "nccl-test-abcde", "uid": "u1"}
    pod["metadata"]["annotations"] |= {"gpufabric.io/group": "nccl", "gpufabric.io/group-size": "2"}
    pod["metadata"]["labels"]["gpufabric.io/group"] = "nccl"
    pod["spec"]["schedulingGates"] = [{"name": GATE}]
    pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
    full, slim = pod_record(pod, 0.0), pod_record(slim_pod(pod), 0.0)
    assert full == slim and full.gpus == 8 and full.gated
    n = node(3, taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    v1, v2 = Placer(FakeApi()).view, Placer(FakeApi()).view
    v1.put_node(n)
    v2.put_node(slim_node(n))
    assert v1.nodes == v2.nodes


def test_metrics_count_decisions_and_publish_free_gpus_and_fragmentation() -> None:
    from prometheus_client import generate_latest

    from webhook.server.gauges import publish
    from webhook.server.metrics import WebhookMetrics

    metrics = WebhookMetrics()
    api = FakeApi()
    placer = Placer(api, metrics=metrics)
    placer.nodes_listed(fabric(8))
    placer.pods_listed(
        [gpu_pod("busy", 4, namespace="other", node_name="node-0000", phase="Running")]
    )
    for i in range(2):
        placer.pod_event("ADDED", api.create(member(i, size=2)))
    placer.reconcile()
    publish(metrics, placer)
    text = generate_latest(metrics.registry).decode()
    assert 'gpufabric_group_decisions_total{level="leaf",outcome="placed"} 1.0' in text
    # 64 GPUs - 4 busy - 16 promised = 44 free; leaf-0 (28 free) is the tight fit for 16 GPUs,
    # leaving leaf-0 with 12 free and leaf-1 whole with 32: 12 of 44 free GPUs are fragmented.
    assert 'gpufabric_group_free_gpus{level="leaf"} 44.0' in text
    assert f'gpufabric_group_fragmentation_ratio{{level="leaf"}} {12 / 44}' in text
    assert "gpufabric_group_gated_seconds_count 2.0" in text


def test_waiting_events_change_with_the_reason_but_not_more_often_than_every_30_s() -> None:
    now = [1000.0]
    api = FakeApi()
    placer = Placer(api, clock=lambda: now[0])
    placer.nodes_listed(fabric(8))
    placer.pods_listed(
        [
            gpu_pod(f"b{i}", 8, namespace="o", node_name=f"node-{i:04d}", phase="Running")
            for i in (0, 4, 5)
        ]
    )
    for i in range(4):
        placer.pod_event("ADDED", api.create(member(i, size=4)))
    placer.reconcile()
    first = "required group llama: no leaf has 32 free GPUs for 4 pods; best: leaf-0 with 24"
    assert [e[2] for e in api.events] == [first] * 4
    placer.pod_event(
        "DELETED", gpu_pod("b5", namespace="o", node_name="node-0005")
    )  # best: 24 -> 24
    placer.pod_event(
        "ADDED", gpu_pod("b7", 8, namespace="o", node_name="node-0003", phase="Running")
    )
    placer.reconcile()  # leaf-0 now 16, leaf-1 24: the message changed, but only 0 s later
    assert len(api.events) == 4
    now[0] += 31
    placer.retry_all()
    placer.reconcile()
    assert [e[2] for e in api.events[4:]] == [
        "required group llama: no leaf has 32 free GPUs for 4 pods; best: leaf-1 with 24"
    ] * 4


def test_a_stopping_placer_patches_nothing_more_and_keeps_the_rest_for_later() -> None:
    # A demoted leader must stop writing before another replica can lead (webhook/leader): once
    # its stop event is set, reconcile leaves every remaining group dirty for the next leader.
    api, placer = setup(fabric(64))
    for group in ("a", "b"):
        for i in range(2):
            placer.pod_event("ADDED", api.create(member(i, group=group, size=2)))
    placer.reconcile(lambda: True)
    assert api.patches == []
    placer.reconcile()
    assert len(api.patches) == 4
