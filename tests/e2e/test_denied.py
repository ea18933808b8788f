"""Refusals as installed: a bad fabric pod is denied through the API server (the
MutatingWebhookConfiguration, failurePolicy Fail, calls the webhook, whose denial reaches the client
naming the annotation), and the placer's own identity is held to its policy."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e import pods
from tests.e2e.env import Env
from tests.e2e.install import NAMESPACE, WEBHOOK_ACCOUNT


@pytest.mark.parametrize(
    ("annotations", "named"),
    [
        ({"gpufabric.io/rdma": "sometimes"}, "gpufabric.io/rdma"),
        (
            {"gpufabric.io/topology": "nvlink", "gpufabric.io/min-nvlink-bandwidth-gbps": "fast"},
            "gpufabric.io/min-nvlink-bandwidth-gbps",
        ),
        (pods.group_annotations("g", 0), "gpufabric.io/group-size"),
    ],
    ids=["rdma-value", "bandwidth-not-integer", "group-size-zero"],
)
def test_bad_fabric_pod_is_denied_naming_the_annotation(
    cluster_env: Env, ns: str, annotations: dict[str, str], named: str
) -> None:
    with pytest.raises(ApiException) as denied:
        pods.create(cluster_env.core, ns, [pods.pod("bad", 8, annotations)])
    assert denied.value.status in (400, 403, 422), denied.value.body
    body = str(denied.value.body)
    assert 'admission webhook \\"pods.gpufabric.io\\" denied the request' in body, body
    assert named in body, body
    assert not pods.listed(cluster_env.core, ns)


def test_the_placer_identity_may_not_change_what_its_policy_keeps(
    cluster_env: Env, ns: str
) -> None:
    """The installed ValidatingAdmissionPolicy binds the webhook's ServiceAccount: a pod update
    outside what the placer sends (here a label) is refused with the policy's message."""
    pods.create(cluster_env.core, ns, [pods.pod("plain", 0)])
    token = cluster_env.cluster.token(WEBHOOK_ACCOUNT, NAMESPACE)
    with cluster_env.cluster.client(token) as placer, pytest.raises(ApiException) as refused:
        client.CoreV1Api(placer).patch_namespaced_pod(
            "plain", ns, {"metadata": {"labels": {"team": "other"}}}
        )
    assert refused.value.status == 422, refused.value.body
    assert "gpufabric-placer-pods" in str(refused.value.body), refused.value.body
    assert "may not change labels" in str(refused.value.body), refused.value.body
