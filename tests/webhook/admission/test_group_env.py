"""Group members' containers get GPUFABRIC_RANK, GPUFABRIC_GROUP_SIZE and GPUFABRIC_PLACEMENT
through the whole admission path; the container's own values win; twice is the same pod."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch

from tests.webhook.helpers import POLICY, golden_cache, pod, review
from webhook.admission.admit import admit
from webhook.admission.placement import Settings
from webhook.groups.model.indexes import COMPLETION_INDEX

CACHE = golden_cache()
GROUP = {"gpufabric.io/group": "llama", "gpufabric.io/group-size": "4"}


def admitted(obj: dict[str, Any]) -> dict[str, Any]:
    answer = admit(review(copy.deepcopy(obj))["request"], CACHE, Settings(POLICY))
    assert answer.response["allowed"] is True, answer.response
    ops = _ops(dict(answer.response))
    return jsonpatch.apply_patch(obj, ops)  # type: ignore[no-any-return]


def _ops(response: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(base64.b64decode(response["patch"])) if "patch" in response else []


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_every_container_of_a_member_gets_the_three_variables_and_its_own_win() -> None:
    member = pod(GROUP)
    member["spec"]["containers"][1]["env"] = [{"name": "GPUFABRIC_RANK", "value": "7"}]
    out = admitted(member)
    main, side = (env(c) for c in out["spec"]["containers"])
    rank = {"fieldRef": {"fieldPath": "metadata.annotations['gpufabric.io/rank']"}}
    placement = {"fieldRef": {"fieldPath": "metadata.annotations['gpufabric.io/placement']"}}
    assert main["GPUFABRIC_RANK"] == rank
    assert main["GPUFABRIC_GROUP_SIZE"] == "4"
    assert main["GPUFABRIC_PLACEMENT"] == placement
    assert side["GPUFABRIC_RANK"] == "7"  # the container's own value wins
    assert side["GPUFABRIC_GROUP_SIZE"] == "4" and side["GPUFABRIC_PLACEMENT"] == placement
    assert admitted(out) == out  # reinvocation adds nothing


def test_a_pod_outside_a_group_gets_none_of_them() -> None:
    out = admitted(pod({"gpufabric.io/topology": "nvlink"}))
    assert not any(k.startswith("GPUFABRIC_") for c in out["spec"]["containers"] for k in env(c))


def test_an_index_not_below_the_group_size_is_denied_naming_it() -> None:
    member = pod({**GROUP, COMPLETION_INDEX: "4"})
    answer = admit(review(member)["request"], CACHE, Settings(POLICY))
    assert answer.outcome == "denied"
    assert (
        f"{COMPLETION_INDEX}=4 is not below the group size 4"
        in answer.response["status"]["message"]
    )


def test_a_pod_kueue_manages_gets_none_of_them() -> None:
    member = pod({**GROUP})
    member["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    out = admitted(member)  # Kueue places it: the placer writes no rank
    assert not any(k.startswith("GPUFABRIC_") for c in out["spec"]["containers"] for k in env(c))
