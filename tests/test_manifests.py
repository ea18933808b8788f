"""daemonset/: the base and every stack of components renders and validates offline against the
Kubernetes schemas, the components switch their flags on, and the programs accept every flag the
manifests pass. What the install may do and reach: test_manifests_security.py."""

from __future__ import annotations

from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.manifests import (
    COMPONENTS,
    DAEMONSET,
    INSTALLS,
    K8S_VERSION,
    ROOT,
    find,
    namespace_labels,
    render,
    selects,
    webhook_args,
)


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


def test_the_install_moves_to_another_namespace_without_loose_ends() -> None:
    docs = render(namespace="gpu-ops")
    for d in docs:
        assert "gpufabric-system" not in yaml.safe_dump(d), (d["kind"], d["metadata"]["name"])
    hook = find(docs, "MutatingWebhookConfiguration", "gpufabric-webhook")["webhooks"][0]
    assert hook["clientConfig"]["service"]["namespace"] == "gpu-ops"
    assert not selects(hook["namespaceSelector"], namespace_labels(docs, "gpu-ops"))
    assert selects(hook["namespaceSelector"], namespace_labels(docs, "gpufabric-system"))


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
