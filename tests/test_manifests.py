"""daemonset/: the base and every stack of components renders, validates offline against the Kubernetes schemas, and asks for
no more privilege than reviewed here."""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DAEMONSET = ROOT / "daemonset"
COMPONENTS = sorted(p.name for p in (DAEMONSET / "components").iterdir())
K8S_VERSION = "1.30.0"
# One install of each component on its own, and everything stacked (what a user's kustomization does).
INSTALLS: list[tuple[str, ...]] = [(), *((c,) for c in COMPONENTS), tuple(COMPONENTS)]


def kustomize(directory: Path) -> tuple[dict[str, Any], ...]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl (with built-in kustomize) is needed to render daemonset/"
    out = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


@functools.cache
def render(*components: str, namespace: str | None = None) -> tuple[dict[str, Any], ...]:
    """What a user's kustomization (base + these components, optionally moved to another
    namespace) installs; no arguments is daemonset/ itself."""
    if not components and namespace is None:
        return kustomize(DAEMONSET)
    with tempfile.TemporaryDirectory() as tmp:
        # A copy, so the user's directory sits beside daemonset/ as docs/install.md lays it out.
        shutil.copytree(DAEMONSET, Path(tmp) / "daemonset")
        mine = Path(tmp) / "my-gpufabric"
        mine.mkdir()
        kustomization: dict[str, Any] = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": ["../daemonset/base"],
            "components": [f"../daemonset/components/{c}" for c in components],
        }
        if namespace:
            kustomization["namespace"] = namespace
        (mine / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
        return kustomize(mine)


def find(docs: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


@pytest.mark.parametrize("components", INSTALLS, ids=lambda c: "+".join(c) or "default")
def test_install_renders_and_validates_against_kubernetes_schemas(
    components: tuple[str, ...],
) -> None:
    docs = render(*components)
    assert len(docs) >= 25
    unchecked = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            unchecked.append(doc["apiVersion"])
    # Outside kinds (no schema in kubernetes_validate): cert-manager's, and the Prometheus
    # Operator's, which tests/test_monitoring.py checks.
    assert set(unchecked) <= {"cert-manager.io/v1", "monitoring.coreos.com/v1"}, unchecked


def test_every_component_is_a_kustomize_component() -> None:
    # Overlays (kind Kustomization with ../../base) cannot be combined; Components stack.
    for name in COMPONENTS:
        doc = yaml.safe_load((DAEMONSET / "components" / name / "kustomization.yaml").read_text())
        assert doc["kind"] == "Component", name
        assert doc["apiVersion"] == "kustomize.config.k8s.io/v1alpha1", name
    assert not (DAEMONSET / "overlays").exists()


def webhook_args(docs: tuple[dict[str, Any], ...]) -> list[str]:
    dep = find(docs, "Deployment", "gpufabric-webhook")
    return list(dep["spec"]["template"]["spec"]["containers"][0]["args"])


def test_components_stack_in_one_install() -> None:
    docs = render("cufile-policy", "nccl-tuning", "cert-manager")
    args = webhook_args(docs)
    assert "--cufile-configmap=gpufabric-cufile-policy" in args
    assert "--inject-nccl-tuning" in args and "--labeler" in args
    assert find(docs, "ConfigMap", "gpufabric-cufile-policy")["data"]["cufile.json"]
    assert find(docs, "Certificate", "gpufabric-webhook")
    kinds = {d["kind"] for d in docs}
    assert "Job" not in kinds and "CronJob" not in kinds  # cert-manager replaces the bootstrap
    hook = find(docs, "MutatingWebhookConfiguration", "gpufabric-webhook")
    assert hook["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": "gpufabric-system/gpufabric-webhook"
    }
    everything = render(*COMPONENTS)
    assert "--labeler" not in webhook_args(everything)
    assert {"--inject-nccl-tuning", "--no-nccl-ib-hca"} <= set(webhook_args(everything))
    agent = find(everything, "DaemonSet", "gpufabric-agent")["spec"]["template"]["spec"]
    assert "--resync=1m" in agent["containers"][0]["args"]


def ingress_allows(policy: dict[str, Any], source_ip: str, port: int, labels: bool) -> bool:
    """NetworkPolicy ingress semantics for one source: any rule whose ports and peers match."""
    import ipaddress

    for rule in policy["spec"].get("ingress", []):
        ports = rule.get("ports")
        if ports and not any(p["port"] == port for p in ports):
            continue
        peers = rule.get("from")
        if not peers:
            return True  # no `from`: every source
        for peer in peers:
            block = peer.get("ipBlock")
            if block and ipaddress.ip_address(source_ip) in ipaddress.ip_network(block["cidr"]):
                return True
            if "namespaceSelector" in peer and labels:
                return True
    return False


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


def test_base_is_what_kubectl_apply_k_daemonset_installs() -> None:
    kinds = sorted({d["kind"] for d in render()})
    assert kinds == sorted(
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "CronJob",
            "CustomResourceDefinition",
            "DaemonSet",
            "Deployment",
            "Job",
            "MutatingWebhookConfiguration",
            "Namespace",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ]
    )
    assert all(
        d["metadata"].get("namespace", "gpufabric-system") == "gpufabric-system" for d in render()
    )


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
        (("",), ("pods/eviction",), (), ("create",)),  # preemption: PDBs hold, no pod delete
        (("",), ("events",), (), ("create",)),
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


def namespace_labels(docs: tuple[dict[str, Any], ...], name: str) -> dict[str, str]:
    """A namespace's labels as the API server sets them (ours from the manifest)."""
    ours = [d for d in docs if d["kind"] == "Namespace" and d["metadata"]["name"] == name]
    labels = dict(ours[0]["metadata"].get("labels", {})) if ours else {}
    return {**labels, "kubernetes.io/metadata.name": name}


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """LabelSelector semantics: matchLabels and every matchExpression must hold."""
    ok = all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())
    for e in selector.get("matchExpressions", []):
        key, op, values = e["key"], e["operator"], e.get("values", [])
        ok &= {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
    return ok


def test_the_install_moves_to_another_namespace_without_loose_ends() -> None:
    docs = render(namespace="gpu-ops")
    for d in docs:
        assert "gpufabric-system" not in yaml.safe_dump(d), (d["kind"], d["metadata"]["name"])
    hook = find(docs, "MutatingWebhookConfiguration", "gpufabric-webhook")["webhooks"][0]
    assert hook["clientConfig"]["service"]["namespace"] == "gpu-ops"
    assert not selects(hook["namespaceSelector"], namespace_labels(docs, "gpu-ops"))
    assert selects(hook["namespaceSelector"], namespace_labels(docs, "gpufabric-system"))


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


@pytest.mark.parametrize(
    ("component", "flag"),
    [
        ("nccl-tuning", "--inject-nccl-tuning"),
        ("cufile-policy", "--cufile-configmap=gpufabric-cufile-policy"),
        ("no-nccl-ib-hca", "--no-nccl-ib-hca"),
    ],
)
def test_feature_components_switch_their_flag(component: str, flag: str) -> None:
    args = find(render(component), "Deployment", "gpufabric-webhook")["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    assert flag in args
    assert (
        flag
        not in find(render(), "Deployment", "gpufabric-webhook")["spec"]["template"]["spec"][
            "containers"
        ][0]["args"]
    )


def test_flags_in_manifests_are_accepted_by_the_programs() -> None:
    from agent.config import build_parser as agent_parser
    from webhook.__main__ import build_parser as webhook_parser

    for components in INSTALLS:
        docs = render(*components)
        args = find(docs, "Deployment", "gpufabric-webhook")["spec"]["template"]["spec"][
            "containers"
        ][0]["args"]
        webhook_parser().parse_args(args)
        args = find(docs, "DaemonSet", "gpufabric-agent")["spec"]["template"]["spec"]["containers"][
            0
        ]["args"]
        agent_parser().parse_args(args)
    no_labeler = find(render("no-labeler"), "Deployment", "gpufabric-webhook")
    assert "--labeler" not in no_labeler["spec"]["template"]["spec"]["containers"][0]["args"]


def claim_schema() -> dict[str, Any]:
    crd = find(render(), "CustomResourceDefinition", "gpuclaims.gpufabric.io")
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_claim_crd_accepts_the_examples_and_rejects_invalid_claims() -> None:
    for path in (ROOT / "samples" / "claims").glob("*.yaml"):
        jsonschema.validate(yaml.safe_load(path.read_text()), claim_schema())
    for bad in (
        {"topology": {"mode": "ring"}},
        {"network": {"minPorts": 0}},
        {"storage": {"cuFile": "Always"}},
        {"topology": {"minBandwidthGBps": -1}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(
                {
                    "apiVersion": "gpufabric.io/v1alpha1",
                    "kind": "GpuClaim",
                    "metadata": {"name": "x"},
                    "spec": bad,
                },
                claim_schema(),
            )


def test_dockerfiles_are_multistage_and_non_root() -> None:
    for name in ("agent.Dockerfile", "webhook.Dockerfile"):
        text = (ROOT / "docker" / name).read_text()
        assert text.count("FROM ") == 2 and "USER 65532" in text
        final = text.split("FROM ")[-1]
        assert "gcc" not in final and "build-essential" not in final


def test_dashboard_and_docs_name_only_metrics_the_code_exports() -> None:
    import json
    import re

    from prometheus_client import generate_latest

    from agent.metrics import AgentMetrics
    from webhook.server.metrics import WebhookMetrics

    agent, hook = AgentMetrics(), WebhookMetrics()
    agent.condition.labels(type="FabricHealthy").set(1)
    agent.applies.labels(outcome="applied").inc()
    hook.admissions.count("mutated", 0.001)
    hook.labeler_applies.labels(outcome="applied").inc()
    hook.watch_stale.labels(watch="nodes").set(0)
    hook.leader.labels(lease="gpufabric-labeler").set(1)
    hook.decided("leaf", "placed", 0.001)
    hook.group_free_gpus.labels(level="leaf").set(8)
    hook.group_fragmentation.labels(level="leaf").set(0.5)
    hook.group_waiting_priority.labels(priority="100").set(1)
    exported = (generate_latest(agent.registry) + generate_latest(hook.registry)).decode()
    names = set(
        re.findall(
            r"^(gpufabric_[a-z_]+?)(?:_bucket|_count|_sum|_total|_created)?[{ ]", exported, re.M
        )
    )
    names |= {n + "_total" for n in names} | {n + "_bucket" for n in names}
    dash = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    used = {
        m
        for p in dash["panels"]
        for t in p.get("targets", [])  # rows have none
        for m in re.findall(r"gpufabric_[a-z_]+", t["expr"])
    }
    assert used and used <= names, used - names
    documented = set(
        re.findall(r"`(gpufabric_[a-z_]+)", (ROOT / "docs" / "metrics.md").read_text())
    )
    assert documented <= names, documented - names


EXPORTS = {
    "kueue": ("kueue.x-k8s.io", "topologies"),
    "kai": ("kai.scheduler", "topologies"),
    "volcano": ("topology.volcano.sh", "hypernodes"),
}


@pytest.mark.parametrize("target", sorted(EXPORTS))
def test_export_components_switch_the_export_on_with_exactly_its_rbac(target: str) -> None:
    from webhook.__main__ import build_parser
    from webhook.serve import export_targets

    docs = render(f"export-{target}")
    args = webhook_args(docs)
    assert f"--export={target}" in args and "--labeler" in args
    assert export_targets(build_parser().parse_args(args)) == (target,)
    role = find(docs, "ClusterRole", f"gpufabric-export-{target}")
    group, plural = EXPORTS[target]
    assert role["rules"] == [
        {
            "apiGroups": [group],
            "resources": [plural],
            "verbs": ["create", "delete", "list", "patch"],
        }
    ]
    binding = find(docs, "ClusterRoleBinding", f"gpufabric-export-{target}")
    assert [s["name"] for s in binding["subjects"]] == ["gpufabric-webhook"]
    assert not any(d["metadata"]["name"].startswith("gpufabric-export") for d in render())


def test_export_components_stack() -> None:
    from webhook.__main__ import build_parser
    from webhook.serve import export_targets

    args = webhook_args(render("export-kueue", "export-kai", "export-volcano"))
    assert export_targets(build_parser().parse_args(args)) == ("kueue", "kai", "volcano")


@pytest.mark.parametrize("components", INSTALLS, ids=lambda c: "+".join(c) or "default")
def test_every_install_runs_the_group_placer(components: tuple[str, ...]) -> None:
    # The webhook gates group members only when it runs the placer (issue 17 item 3): an
    # install without it would leave them ungated; keep it on in every combination.
    webhook = find(render(*components), "Deployment", "gpufabric-webhook")
    assert "--placer" in webhook["spec"]["template"]["spec"]["containers"][0]["args"]
