"""daemonset/ asks for no more privilege than reviewed here: least-privilege RBAC, an opt-in
NetworkPolicy that never blocks admission, a mutating webhook scoped away from the system
namespaces, the ValidatingAdmissionPolicy that binds the agent to its own node, and hardened,
non-root pods and images."""

from __future__ import annotations

from typing import Any

import celpy
import pytest
import yaml

from tests.manifests import (
    ROOT,
    find,
    ingress_allows,
    namespace_labels,
    render,
    selects,
)


@pytest.mark.parametrize(
    "apiserver", ["10.0.0.1", "172.16.0.2", "100.64.3.4", "192.168.10.5", "34.118.0.9"]
)
def test_network_policy_is_opt_in_and_never_blocks_admission(apiserver: str) -> None:
    assert "NetworkPolicy" not in {d["kind"] for d in render()}
    policy = find(render("network-policy"), "NetworkPolicy", "gpufabric-webhook")
    # Wherever the control plane calls from (GKE, EKS, AKS, konnectivity), admission gets through.
    assert ingress_allows(policy, apiserver, 8443, labels=False)
    assert not ingress_allows(policy, apiserver, 9401, labels=False)
    assert ingress_allows(policy, "10.1.2.3", 9401, labels=True)  # Prometheus


def rules(
    kind: str, name: str
) -> list[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]]:
    role = find(render(), kind, name)
    return [
        (
            tuple(r.get("apiGroups", [])),
            tuple(r["resources"]),
            tuple(r.get("resourceNames", [])),
            tuple(r["verbs"]),
        )
        for r in role["rules"]
    ]


def test_rbac_is_exactly_least_privilege() -> None:
    assert rules("ClusterRole", "gpufabric-agent") == [
        (("gpufabric.io",), ("gpunodestatuses",), (), ("create", "get", "patch")),
        (("gpufabric.io",), ("gpunodestatuses/status",), (), ("get", "patch")),
        (("",), ("nodes",), (), ("get", "list", "watch")),
    ]
    assert rules("ClusterRole", "gpufabric-webhook") == [
        (("gpufabric.io",), ("gpunodestatuses", "gpuclaims", "gpufabrics"), (), ("list", "watch")),
        (("",), ("nodes",), (), ("list", "watch")),
        (("resource.nvidia.com",), ("computedomains",), (), ("list", "watch")),  # IMEX
        (("scheduling.k8s.io",), ("podgroups",), (), ("list", "watch")),  # native gang
    ]
    assert rules("ClusterRole", "gpufabric-labeler") == [
        (("",), ("nodes",), (), ("get", "list", "patch", "watch")),
        (("",), ("events",), (), ("create",)),  # NoNVLinkDomain on a Node
        (("gpufabric.io",), ("gpufabrics",), (), ("create", "get", "patch")),
        (("gpufabric.io",), ("gpufabrics/status",), (), ("get", "patch")),
    ]
    assert rules("Role", "gpufabric-topology") == [
        (("",), ("configmaps",), (), ("list", "watch")),  # the name and the part label
    ]
    assert rules("Role", "gpufabric-labeler-lease") == [
        (("coordination.k8s.io",), ("leases",), (), ("create",)),
        (
            ("coordination.k8s.io",),
            ("leases",),
            ("gpufabric-labeler", "gpufabric-placer"),
            ("get", "update"),
        ),
    ]
    assert rules("ClusterRole", "gpufabric-placer") == [
        (("",), ("nodes",), (), ("list", "watch")),
        (("",), ("pods",), (), ("list", "patch", "watch")),
        # a native gang member's status.nominatedNodeName, nothing else (its own policy)
        (("",), ("pods/status",), (), ("patch",)),
        (("",), ("pods/eviction",), (), ("create",)),  # preemption: PDBs hold, no pod delete
        (("policy",), ("poddisruptionbudgets",), (), ("list", "watch")),  # counted per plan
        (("",), ("events",), (), ("create",)),
        # a group's, held by the placer's finalizer until its last member is gone (patch); one
        # of its name that a create finds (409) read back (get), as a PodGroup
        (
            ("resource.nvidia.com",),
            ("computedomains",),
            (),
            ("create", "delete", "get", "patch"),
        ),
        (("resource.k8s.io",), ("resourceclaimtemplates",), (), ("list", "watch")),  # made yet?
        (
            ("scheduling.k8s.io",),
            ("podgroups",),
            (),
            ("create", "delete", "get", "patch"),
        ),  # a group's gang
    ]
    assert rules("Role", "gpufabric-placer-lease") == [
        (("coordination.k8s.io",), ("leases",), (), ("create",)),
        (("coordination.k8s.io",), ("leases",), ("gpufabric-placer",), ("get", "update")),
    ]
    assert rules("Role", "gpufabric-certs") == [
        (("",), ("secrets",), (), ("create",)),
        (("",), ("secrets",), ("gpufabric-webhook-tls",), ("get", "update")),
    ]
    assert rules("ClusterRole", "gpufabric-certs") == [
        (
            ("admissionregistration.k8s.io",),
            ("mutatingwebhookconfigurations",),
            ("gpufabric-webhook",),
            ("get", "patch"),
        ),
    ]
    bindings = {
        (d["kind"], d["metadata"]["name"]): [s["name"] for s in d["subjects"]]
        for d in render()
        if d["kind"].endswith("Binding") and "subjects" in d
    }
    assert bindings[("ClusterRoleBinding", "gpufabric-agent")] == ["gpufabric-agent"]
    assert bindings[("ClusterRoleBinding", "gpufabric-labeler")] == ["gpufabric-webhook"]


def test_mutating_webhook_is_scoped_and_safe() -> None:
    hook = find(render(), "MutatingWebhookConfiguration", "gpufabric-webhook")["webhooks"][0]
    assert hook["sideEffects"] == "None" and hook["admissionReviewVersions"] == ["v1"]
    assert hook["timeoutSeconds"] <= 5 and hook["reinvocationPolicy"] == "IfNeeded"
    assert hook["failurePolicy"] == "Fail"
    for ns in ("kube-system", "kube-node-lease", "gpufabric-system"):
        assert not selects(hook["namespaceSelector"], namespace_labels(render(), ns)), ns
    assert selects(hook["namespaceSelector"], namespace_labels(render(), "team-a"))
    cond = celpy.Environment().program(
        celpy.Environment().compile(hook["matchConditions"][0]["expression"])
    )

    def sent(annotations: dict[str, str] | None) -> bool:
        meta: dict[str, Any] = {"name": "p"}
        if annotations is not None:
            meta["annotations"] = annotations
        return bool(cond.evaluate({"object": celpy.json_to_cel({"metadata": meta})}))

    assert sent({"gpufabric.io/rdma": "required"})
    assert not sent({"example.com/x": "1"})
    assert not sent(None)


def vap_eval(
    username: str,
    extra: dict[str, list[str]],
    operation: str,
    name: str,
    docs: tuple[dict[str, Any], ...] | None = None,
) -> list[str]:
    """Evaluate the ValidatingAdmissionPolicy like the API server: variables, then validations."""
    docs = render() if docs is None else docs
    policy = find(docs, "ValidatingAdmissionPolicy", "gpufabric-agent-own-node")["spec"]
    env = celpy.Environment()
    obj = {"metadata": {"name": name}}
    activation: dict[str, Any] = {
        "request": celpy.json_to_cel(
            {"operation": operation, "userInfo": {"username": username, "extra": extra}}
        ),
        "object": celpy.json_to_cel(None if operation == "DELETE" else obj),
        "oldObject": celpy.json_to_cel(obj if operation == "DELETE" else None),
    }
    match = env.program(env.compile(policy["matchConditions"][0]["expression"]))
    if not bool(match.evaluate(activation)):
        return []
    variables: dict[str, Any] = {}
    for var in policy["variables"]:
        variables[var["name"]] = env.program(env.compile(var["expression"])).evaluate(
            {**activation, "variables": celpy.json_to_cel(variables)}
        )
    failures = []
    for v in policy["validations"]:
        ok = env.program(env.compile(v["expression"])).evaluate(
            {**activation, "variables": celpy.json_to_cel(variables)}
        )
        if not bool(ok):
            failures.append(v["expression"])
    return failures


AGENT = "system:serviceaccount:gpufabric-system:gpufabric-agent"
NODE = "authentication.kubernetes.io/node-name"


@pytest.mark.parametrize(
    ("user", "extra", "op", "name", "allowed"),
    [
        (AGENT, {NODE: ["gpu-1"]}, "CREATE", "gpu-1", True),
        (AGENT, {NODE: ["gpu-1"]}, "UPDATE", "gpu-1", True),
        (AGENT, {NODE: ["gpu-1"]}, "UPDATE", "gpu-2", False),
        (AGENT, {NODE: ["gpu-1"]}, "DELETE", "gpu-2", False),
        (AGENT, {}, "UPDATE", "gpu-1", False),
        ("system:serviceaccount:gpufabric-system:other", {}, "UPDATE", "gpu-2", True),
        (
            "system:serviceaccount:gpu-ops:gpufabric-agent",
            {NODE: ["gpu-1"]},
            "UPDATE",
            "gpu-2",
            False,
        ),
        ("system:serviceaccount:gpu-ops:gpufabric-agent-2", {}, "UPDATE", "gpu-2", True),
        ("system:serviceaccount:a:b:gpufabric-agent", {}, "UPDATE", "gpu-2", True),
    ],
    ids=[
        "own-create",
        "own-update",
        "other-node",
        "other-delete",
        "no-node-claim",
        "not-the-agent",
        "agent-in-another-namespace",
        "similar-name",
        "not-a-namespace",
    ],
)
def test_validating_admission_policy_binds_agent_to_its_node(
    user: str, extra: dict[str, list[str]], op: str, name: str, allowed: bool
) -> None:
    assert (vap_eval(user, extra, op, name) == []) is allowed


def test_vap_binds_the_agent_wherever_gpufabric_is_installed() -> None:
    docs = render(namespace="gpu-ops")
    policy = find(docs, "ValidatingAdmissionPolicy", "gpufabric-agent-own-node")
    assert "gpufabric-system" not in yaml.safe_dump(policy)
    ds = find(docs, "DaemonSet", "gpufabric-agent")
    sa = ds["spec"]["template"]["spec"]["serviceAccountName"]
    agent = f"system:serviceaccount:{ds['metadata']['namespace']}:{sa}"
    assert agent == "system:serviceaccount:gpu-ops:gpufabric-agent"
    assert vap_eval(agent, {NODE: ["gpu-1"]}, "UPDATE", "gpu-1", docs) == []
    assert vap_eval(agent, {NODE: ["gpu-1"]}, "UPDATE", "gpu-2", docs) != []


def test_vap_covers_the_status_subresource() -> None:
    policy = find(render(), "ValidatingAdmissionPolicy", "gpufabric-agent-own-node")
    assert (
        "gpunodestatuses/status"
        in policy["spec"]["matchConstraints"]["resourceRules"][0]["resources"]
    )


def test_agent_daemonset_is_hardened_and_mounts_read_only() -> None:
    ds = find(render(), "DaemonSet", "gpufabric-agent")
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] and sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["allowPrivilegeEscalation"] is False
    env = {e["name"]: e for e in c["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    host = {v["name"] for v in pod["volumes"] if "hostPath" in v}
    for m in c["volumeMounts"]:
        if m["name"] in host:
            assert m.get("readOnly") is True, m
    assert c["resources"]["limits"]["memory"] and c["resources"]["requests"]["cpu"]
    assert any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])


def test_webhook_deployment_is_ha_and_non_root() -> None:
    dep = find(render(), "Deployment", "gpufabric-webhook")
    pod = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 2 and pod["securityContext"]["runAsNonRoot"] is True
    assert pod["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    assert pod["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert find(render(), "PodDisruptionBudget", "gpufabric-webhook")["spec"]["minAvailable"] == 1


def test_dockerfiles_are_multistage_and_non_root() -> None:
    for name in ("agent.Dockerfile", "webhook.Dockerfile"):
        text = (ROOT / "docker" / name).read_text()
        assert text.count("FROM ") == 2 and "USER 65532" in text
        final = text.split("FROM ")[-1]
        assert "gcc" not in final and "build-essential" not in final
