"""A bad fabric pod is denied through the API server, as installed: the MutatingWebhookConfiguration
(failurePolicy Fail) calls the webhook, whose denial reaches the client naming the annotation."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from tests.e2e import pods
from tests.e2e.env import Env


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
