"""A refused placement is never silent and evicts nothing, as installed (issue 36 items 2-3).
An extra ValidatingAdmissionPolicy, bound to this test's namespace only, refuses the placer's
patch (it writes gpufabric.io/rank): a high-priority group on a full leaf then evicts no pod,
the API server's words come back in one GroupWriteRefused Event, the webhook's log and its
metric; once the policy is gone, the group preempts the leaf and is bound there."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e import pods
from tests.e2e.env import Env
from tests.e2e.fleet import Fleet
from tests.e2e.waits import wait_until

LOW, HIGH = "e2e-refused-low", "e2e-refused-high"
NO_RANK = (
    "!has(object.metadata.annotations) || !('gpufabric.io/rank' in object.metadata.annotations)"
    " || (has(oldObject.metadata.annotations) && 'gpufabric.io/rank' in"
    " oldObject.metadata.annotations)"
)


@pytest.fixture
def refusing(cluster_env: Env, ns: str) -> Iterator[str]:
    """A policy that refuses the placer's patch of pods in `ns`, and the priority classes."""
    admission = client.AdmissionregistrationV1Api(cluster_env.cluster.client())
    sched = client.SchedulingV1Api(cluster_env.cluster.client())
    name = f"refuse-rank-{ns}"[:63]
    admission.create_validating_admission_policy(
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["UPDATE"],
                            "resources": ["pods"],
                        }
                    ]
                },
                "validations": [{"expression": NO_RANK, "message": "e2e: no rank here"}],
            },
        }
    )
    admission.create_validating_admission_policy_binding(
        {
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}
                },
            },
        }
    )
    for cls, value in ((LOW, 100), (HIGH, 10000)):
        sched.create_priority_class(
            client.V1PriorityClass(metadata=client.V1ObjectMeta(name=cls), value=value)
        )
    try:
        yield name
    finally:
        for cls in (LOW, HIGH):
            sched.delete_priority_class(cls)
        for drop in (
            admission.delete_validating_admission_policy_binding,
            admission.delete_validating_admission_policy,
        ):
            try:
                drop(name)
            except client.exceptions.ApiException as err:
                if err.status != 404:
                    raise


def refused_metric(env: Env) -> float:
    url = f"http://127.0.0.1:{env.webhook.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("gpufabric_placer_refused_writes_total{")
        and 'write="pods/patch-dry-run"' in line
    )


def placer_free_gpus(env: Env, level: str) -> float | None:
    """The placer's gauge of free GPUs on the nodes labelled with the level (None: not set yet)."""
    url = f"http://127.0.0.1:{env.webhook.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    prefix = f'gpufabric_group_free_gpus{{level="{level}"}} '
    found = [float(line[len(prefix) :]) for line in text.splitlines() if line.startswith(prefix)]
    return found[0] if found else None


def test_a_refused_placement_evicts_nothing_and_says_why(
    cluster_env: Env, fleet: Fleet, ns: str, refusing: str
) -> None:
    core = cluster_env.core
    layout = fleet.hgx_leaves(leaves=2, per_leaf=2)
    cluster_env.kubelet.run_pods_in(ns)
    nodes = [n for names in layout.values() for n in names]
    low = [pods.pod(f"low-{n}", 8, labels={"e2e/role": "low"}, priority_class=LOW) for n in nodes]
    for body, node in zip(low, nodes, strict=True):
        body["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    pods.create(core, ns, low)
    pods.wait_bound(core, ns, len(low), selector="e2e/role=low")
    # the placer's own view full too (its Pod watch has seen them bound): else it tries a real
    # placement first, refused as well, and waits out that refusal's backoff before the dry run
    wait_until(lambda: placer_free_gpus(cluster_env, "leaf") == 0, 60, "the placer's view full")
    metric_before = refused_metric(cluster_env)
    started = time.monotonic()
    pods.create(
        core,
        ns,
        (
            pods.pod(f"high-{i}", 8, pods.group_annotations("urgent", 2), priority_class=HIGH)
            for i in range(2)
        ),
    )
    told = wait_until(
        lambda: [e for e in pods.events(core, ns, "GroupWriteRefused") if "(dry run)" in e],
        60,
        "a GroupWriteRefused Event for the plan's dry run",
    )
    refused_after = time.monotonic() - started
    time.sleep(3)  # the placer has had its chance to evict: it must not have
    assert len(told) == 1, told
    assert f"ValidatingAdmissionPolicy '{refusing}'" in told[0] and "e2e: no rank here" in told[0]
    assert "(dry run)" in told[0] and "no pod is evicted" in told[0]
    left = pods.listed(core, ns, "e2e/role=low")
    assert len(left) == 4 and all(p.metadata.deletion_timestamp is None for p in left)
    assert not pods.events(core, ns, "Preempted")
    assert all(p.spec.scheduling_gates for p in pods.listed(core, ns, "gpufabric.io/group"))
    assert refused_metric(cluster_env) > metric_before
    assert "write refused" in cluster_env.webhook.log_since_mark()

    client.AdmissionregistrationV1Api(
        cluster_env.cluster.client()
    ).delete_validating_admission_policy_binding(refusing)
    unblocked = time.monotonic()
    bound = pods.wait_bound(core, ns, 2, selector="gpufabric.io/group=urgent", timeout=120)
    took = time.monotonic() - unblocked
    leaf = {p.metadata.annotations["gpufabric.io/placement"] for p in bound}
    assert len(leaf) == 1
    assert len(pods.events(core, ns, "Preempted")) == 2
    print(f"refused told after {refused_after:.1f}s; bound {took:.1f}s after the policy went")
