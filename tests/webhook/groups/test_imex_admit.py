"""IMEX channel claims at admission, through the whole admission path: the claim added once to
spec.resourceClaims and to each container that asks for GPUs, the denials in one line each, and a
pod of a user's ComputeDomain outside any group held to one NVLink domain. All from cached state:
`Book` and the NVLink domain sizes, as the watches keep them."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
import yaml

from tests.webhook.export.fabrics import SCHEDULERS
from tests.webhook.helpers import POLICY, golden_cache, pod, review
from webhook.admission.admit import Answer, admit
from webhook.admission.placement import Settings
from webhook.groups.extensions.imex.domains import Book
from webhook.groups.extensions.imex.inject import ImexState
from webhook.groups.extensions.imex.names import LABEL_POD_DOMAIN

CACHE = golden_cache()
GROUP = {"gpufabric.io/group": "moe", "gpufabric.io/group-size": "8"}
REQUIRED = {**GROUP, "gpufabric.io/compute-domain": "required"}
CLAIM = {"name": "gpufabric-imex-channel", "resourceClaimTemplateName": "moe-imex-channel"}
AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"


def state(served: bool | None = True, largest: int = 18, domains: Any = ()) -> ImexState:
    book = Book()
    if served is not None:
        book.set_served(served)
        if served:
            book.listed(list(domains))
    return ImexState(book, lambda: largest)


def answer(obj: dict[str, Any], imex: ImexState | None) -> Answer:
    return admit(review(copy.deepcopy(obj))["request"], CACHE, Settings(POLICY, imex=imex))


def admitted(obj: dict[str, Any], imex: ImexState | None) -> dict[str, Any]:
    got = answer(obj, imex)
    assert got.response["allowed"] is True, got.response
    patch = str(dict(got.response).get("patch") or "")
    ops = json.loads(base64.b64decode(patch)) if patch else []
    return jsonpatch.apply_patch(obj, ops)  # type: ignore[no-any-return]


def denial(obj: dict[str, Any], imex: ImexState | None) -> str:
    got = answer(obj, imex)
    assert got.outcome == "denied", got.response
    return str(got.response["status"]["message"])


def test_a_member_gets_the_claim_once_in_the_pod_and_in_its_gpu_container() -> None:
    out = admitted(pod(REQUIRED), state())
    assert out["spec"]["resourceClaims"] == [CLAIM]
    main, side = out["spec"]["containers"]
    assert main["resources"]["claims"] == [{"name": "gpufabric-imex-channel"}]
    assert "resources" not in side  # it asks for no GPU
    assert admitted(out, state()) == out  # reinvocation adds nothing


def test_claims_of_the_users_own_are_kept_and_the_channel_added_beside_them() -> None:
    own = {"name": "scratch", "resourceClaimTemplateName": "fast-disk"}
    member = pod(REQUIRED, resourceClaims=[own])
    member["spec"]["containers"][0]["resources"]["claims"] = [{"name": "scratch"}]
    out = admitted(member, state())
    assert out["spec"]["resourceClaims"] == [own, CLAIM]
    assert out["spec"]["containers"][0]["resources"]["claims"] == [
        {"name": "scratch"},
        {"name": "gpufabric-imex-channel"},
    ]


def test_required_is_denied_where_the_crd_is_not_served() -> None:
    assert denial(pod(REQUIRED), state(served=False)) == (
        "gpufabric: gpufabric.io/compute-domain: required, but this cluster does not serve "
        "computedomains.resource.nvidia.com (install NVIDIA's DRA driver with ComputeDomains)"
    )


def test_preferred_gets_nothing_where_the_crd_is_not_served_and_says_so() -> None:
    got = answer(pod({**GROUP, "gpufabric.io/compute-domain": "preferred"}), state(False))
    out = admitted(pod({**GROUP, "gpufabric.io/compute-domain": "preferred"}), state(False))
    assert "resourceClaims" not in out["spec"]
    assert any("gets no IMEX channel" in w for w in got.response.get("warnings", []))


def test_required_larger_than_every_nvlink_domain_is_denied_naming_both_counts() -> None:
    big = pod({**REQUIRED, "gpufabric.io/group-size": "19"})
    assert denial(big, state(largest=18)) == (
        "gpufabric: gpufabric.io/compute-domain: required, but group moe has 19 members and the "
        "largest NVLink domain has 18 nodes (one member a node: one IMEX channel a node)"
    )
    assert "no node carries gpufabric.io/nvlink-domain" in denial(pod(REQUIRED), state(largest=0))
    preferred = {
        **REQUIRED,
        "gpufabric.io/group-size": "19",
        "gpufabric.io/compute-domain": "preferred",
    }
    assert admitted(pod(preferred), state(largest=18))["spec"]["resourceClaims"] == [CLAIM]


def test_unknown_served_state_and_bad_values_are_denied_in_one_line() -> None:
    assert "retry in a few seconds" in denial(pod(REQUIRED), state(served=None))
    bad = pod({**GROUP, "gpufabric.io/compute-domain": "always"})
    assert denial(bad, state()) == (
        "gpufabric: gpufabric.io/compute-domain: 'always' is not valid; accepted values: "
        "required, preferred"
    )
    lone = pod({"gpufabric.io/compute-domain": "required"})
    assert denial(lone, state()) == (
        "gpufabric: gpufabric.io/compute-domain: needs gpufabric.io/group (the group's name) as "
        "well"
    )


def demo() -> tuple[dict[str, Any], dict[str, Any]]:
    """The driver's demo: a ComputeDomain and the worker template of its MPIJob."""
    docs = list(
        yaml.safe_load_all(
            (SCHEDULERS / "dra-driver-nvidia-gpu/nvbandwidth-test-job-1.yaml").read_text()
        )
    )
    cd = next(d for d in docs if d["kind"] == "ComputeDomain")
    cd["metadata"] |= {"namespace": "team-a", "uid": "cd-uid-demo"}
    job = next(d for d in docs if d["kind"] == "MPIJob")
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    del worker["spec"]["containers"][0]["env"]  # `env:` with nothing after it: null
    return cd, {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "w", "namespace": "team-a", **worker["metadata"]},
        "spec": worker["spec"],
    }


def test_a_member_claiming_a_users_compute_domain_gets_nothing_injected() -> None:
    cd, worker = demo()
    worker["metadata"]["annotations"] = dict(REQUIRED)
    out = admitted(worker, state(domains=[cd]))
    assert [c["name"] for c in out["spec"]["resourceClaims"]] == ["compute-domain-channel"]


def test_a_lone_pod_of_a_users_compute_domain_is_held_to_one_nvlink_domain() -> None:
    cd, worker = demo()  # no gpufabric.io annotation at all: what the driver's demo writes
    out = admitted(worker, state(domains=[cd]))
    assert LABEL_POD_DOMAIN == "gpufabric.io/compute-domain-uid"  # not the annotation's key
    assert out["metadata"]["labels"][LABEL_POD_DOMAIN] == "cd-uid-demo"
    assert out["spec"]["affinity"]["podAffinity"][AFFINITY] == [
        {
            "labelSelector": {"matchLabels": {LABEL_POD_DOMAIN: "cd-uid-demo"}},
            "topologyKey": "gpufabric.io/nvlink-domain",
        }
    ]
    assert admitted(out, state(domains=[cd])) == out
    assert admitted(worker, state()) == worker  # no ComputeDomain declares its template


def test_the_second_webhook_sends_only_unannotated_pods_that_claim_a_template() -> None:
    import celpy
    from celpy.adapter import json_to_cel

    from tests.manifests import find, render

    hooks = find(render(), "MutatingWebhookConfiguration", "gpufabric-webhook")["webhooks"]
    lone = next(h for h in hooks if h["name"] == "imex-pods.gpufabric.io")
    assert lone["failurePolicy"] == "Ignore"  # an outage admits the pod as written
    assert lone["clientConfig"]["service"] == hooks[0]["clientConfig"]["service"]
    env = celpy.Environment()
    cond = env.program(env.compile(lone["matchConditions"][0]["expression"]))

    def sent(annotations: dict[str, str] | None, claims: list[dict[str, str]] | None) -> bool:
        obj: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": []}}
        if annotations is not None:
            obj["metadata"]["annotations"] = annotations
        if claims is not None:
            obj["spec"]["resourceClaims"] = claims
        return bool(cond.evaluate({"object": json_to_cel(obj)}))

    template = [{"name": "ch", "resourceClaimTemplateName": "imex-channel-0"}]
    assert sent(None, template)
    assert sent({"example.com/x": "1"}, template)
    assert not sent({"gpufabric.io/group": "g"}, template)  # the first webhook has it
    assert not sent(None, [{"name": "c", "resourceClaimName": "shared"}])
    assert not sent(None, None)
