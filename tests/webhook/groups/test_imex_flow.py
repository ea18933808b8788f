"""The whole flow of docs/usage.md "IMEX channels" with its own MPIJob and PyTorchJob: each member
pod as the job's controller makes it, through admission (claim, gate, label), then the placer on
four NVL72 racks (ComputeDomain first, one member a tray, one NVLink domain), then the job's end
(the ComputeDomain deleted after the last pod)."""

from __future__ import annotations

import base64
import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from tests.nvl72 import racks_under_leaves
from tests.webhook.groups.imex_world import arrive, imex_setup, problems
from tests.webhook.helpers import POLICY, golden_cache, review
from webhook.admission.admit import admit
from webhook.admission.placement import Settings
from webhook.groups.extensions.imex.domains import Book
from webhook.groups.extensions.imex.inject import ImexState

DOC = Path(__file__).resolve().parents[3] / "docs" / "usage.md"
CACHE = golden_cache()


def jobs() -> dict[str, dict[str, Any]]:
    section = DOC.read_text().split("### IMEX channels")[1].split("\n## ")[0]
    docs = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", section, re.S)]
    return {d["kind"]: d for d in docs if isinstance(d, dict) and "kind" in d}


def member_pods(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods of the job's replica types that carry the group annotation, as its controller
    creates them (namespace, name, the job as controller)."""
    specs = job["spec"].get("mpiReplicaSpecs") or job["spec"].get("pytorchReplicaSpecs")
    owner = {
        "apiVersion": job["apiVersion"],
        "kind": job["kind"],
        "name": job["metadata"]["name"],
        "uid": f"uid-{job['metadata']['name']}",
        "controller": True,
    }
    out = []
    for role, replica in specs.items():
        template = replica["template"]
        if "gpufabric.io/group" not in (template.get("metadata") or {}).get("annotations", {}):
            continue
        for i in range(replica["replicas"]):
            name = f"{job['metadata']['name']}-{role.lower()}-{i}"
            meta = copy.deepcopy(template["metadata"]) | {
                "name": name,
                "namespace": "team-a",
                "uid": f"uid-team-a-{name}",
                "resourceVersion": "1",
                "ownerReferences": [owner],
            }
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta}
            out.append(pod | {"spec": copy.deepcopy(template["spec"])})
    return out


def admitted(pod: dict[str, Any]) -> dict[str, Any]:
    book = Book()
    book.listed([])
    settings = Settings(POLICY, imex=ImexState(book, lambda: 18))
    got = admit(review(copy.deepcopy(pod))["request"], CACHE, settings)
    assert got.response["allowed"] is True, got.response
    ops = json.loads(base64.b64decode(str(dict(got.response).get("patch") or "")) or "[]")
    return jsonpatch.apply_patch(pod, ops)  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", ["MPIJob", "PyTorchJob"])
def test_the_documented_job_gets_its_compute_domain_and_one_nvlink_domain(kind: str) -> None:
    job = jobs()[kind]
    pods = [admitted(p) for p in member_pods(job)]
    assert len(pods) == 8
    for p in pods:
        assert p["spec"]["schedulingGates"] == [{"name": "gpufabric.io/group"}]
        assert p["spec"]["resourceClaims"][0]["name"] == "gpufabric-imex-channel"
    api, domains, placer = imex_setup(racks_under_leaves(4))
    arrive(api, placer, pods)
    group = pods[0]["metadata"]["annotations"]["gpufabric.io/group"]
    cd = domains.objects[("team-a", group)]
    assert problems(cd) == []
    assert cd["metadata"]["ownerReferences"][0]["kind"] == kind
    assert domains.log[0] == ("create", group, 0)  # before the first gate went
    assert len(api.patches) == 8
    nodes = {placer.view.promised[p["metadata"]["uid"]][0] for p in pods}
    assert len(nodes) == 8  # one member a tray
    assert (
        len({p["metadata"]["annotations"]["gpufabric.io/placement"] for p in api.pods.values()})
        == 1
    )
    for p in list(api.pods.values()):  # the job ends
        placer.pod_event("DELETED", p)
    placer.reconcile()
    assert domains.objects == {}
