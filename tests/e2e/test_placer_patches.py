"""The placer's own patches against the placer policy as installed (issue 36 item 1): every patch
the Placer sends in tests/webhook/groups/test_placer_policy.py (groups of every level, NVLink
domain, ranks, members held to their own lowest domain, a replacement, none), sent by
KubePlacerApi as the ServiceAccount gpufabric-webhook with a TokenRequest token, is admitted by
kube-apiserver; each edit beyond it is refused (422). The pods carry Kueue's queue label, so the
running placer leaves them alone, in a namespace the webhook leaves alone (gpufabric.io/system)."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.env import Env
from tests.e2e.install import NAMESPACE, WEBHOOK_ACCOUNT
from tests.webhook.groups.test_placer_policy import DENIED, placed_member, sent
from webhook.groups.model.names import GATE, KUEUE_QUEUE_LABEL
from webhook.groups.placer.kube import KubePlacerApi

POLICY = "ValidatingAdmissionPolicy 'gpufabric-placer-pods'"


def fresh(pod: dict[str, Any], namespace: str, name: str) -> dict[str, Any]:
    meta = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**(meta.get("labels") or {}), KUEUE_QUEUE_LABEL: "e2e-none"},
            "annotations": dict(meta.get("annotations") or {}),
        },
        "spec": copy.deepcopy(pod["spec"]),
    }


@pytest.fixture
def quiet_ns(cluster_env: Env, ns: str) -> str:
    cluster_env.core.patch_namespace(ns, {"metadata": {"labels": {"gpufabric.io/system": "x"}}})
    return ns


def test_every_patch_the_placer_sends_is_admitted_as_installed(
    cluster_env: Env, quiet_ns: str
) -> None:
    token = cluster_env.cluster.token(WEBHOOK_ACCOUNT, NAMESPACE)
    placer = KubePlacerApi(cluster_env.cluster.client(token))
    core = cluster_env.core
    patches = sent()
    for i, (scenario, old, ops) in enumerate(patches):
        name = f"{old['metadata']['name']}-{i}"
        core.create_namespaced_pod(quiet_ns, fresh(old, quiet_ns, name))
        placer.patch_pod(quiet_ns, name, list(ops), dry_run=True)  # admission runs, nothing kept
        assert core.read_namespaced_pod(name, quiet_ns).spec.scheduling_gates, scenario
        placer.patch_pod(quiet_ns, name, list(ops))  # Rejected (422 ...) would fail the test
        live = core.read_namespaced_pod(name, quiet_ns)
        assert GATE not in {g.name for g in live.spec.scheduling_gates or []}, scenario
        assert "gpufabric.io/placement" in live.metadata.annotations, scenario
    assert len(patches) >= 70


def test_anything_beyond_the_placers_patch_is_refused_as_installed(
    cluster_env: Env, quiet_ns: str
) -> None:
    token = cluster_env.cluster.token(WEBHOOK_ACCOUNT, NAMESPACE)
    sa = client.CoreV1Api(cluster_env.cluster.client(token))
    old, new = placed_member()
    by_policy = []
    for edit, message in DENIED:
        name = "deny-" + edit.__name__[1:].replace("_", "-")
        src = fresh(old, quiet_ns, name)
        cluster_env.core.create_namespaced_pod(quiet_ns, src)
        want = copy.deepcopy(new)
        edit(want)
        ops = jsonpatch.make_patch(src, fresh(want, quiet_ns, name)).patch
        with pytest.raises(ApiException) as refused:
            sa.patch_namespaced_pod(
                name, quiet_ns, ops, _content_type="application/json-patch+json"
            )
        assert refused.value.status == 422, name
        # The API server's own pod validation answers first for a gate added, a toleration or
        # pod anti-affinity changed; the rest is the placer policy's refusal, with its message.
        if POLICY in str(refused.value.body):
            assert message in str(refused.value.body), name
            by_policy.append(name)
    assert len(by_policy) >= 10, by_policy
