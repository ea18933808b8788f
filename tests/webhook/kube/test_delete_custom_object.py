"""delete_custom_object: the PodGroups and ComputeDomains the placer made are deleted only while
they are still the objects it made (a UID precondition); gone or replaced is no error."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.kube.client import delete_custom_object


class Objects:
    def __init__(self, status: int | None) -> None:
        self.status, self.calls = status, list[tuple[Any, ...]]()

    def delete_namespaced_custom_object(self, *args: Any, **kw: Any) -> None:
        assert isinstance(kw["body"], client.V1DeleteOptions)
        self.calls.append((*args, kw["body"].preconditions.uid, kw["_request_timeout"]))
        if self.status is not None:
            raise ApiException(status=self.status, reason="x")


KIND = ("scheduling.k8s.io", "v1alpha2", "podgroups")


@pytest.mark.parametrize("status", [None, 404, 409], ids=["deleted", "gone", "replaced"])
def test_deleted_gone_or_replaced_is_fine(status: int | None) -> None:
    objects = Objects(status)
    delete_custom_object(objects, KIND, "team-a", "gpufabric-g", "uid-1", 2)  # type: ignore[arg-type]
    assert objects.calls == [
        ("scheduling.k8s.io", "v1alpha2", "team-a", "podgroups", "gpufabric-g", "uid-1", 2)
    ]


def test_any_other_answer_is_raised_for_the_caller_to_retry() -> None:
    with pytest.raises(ApiException):
        delete_custom_object(Objects(403), KIND, "team-a", "g", "u", 2)  # type: ignore[arg-type]
