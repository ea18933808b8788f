"""What daemonset/ installs, rendered as a user's kustomization does (base plus components,
optionally in another namespace), and the Kubernetes semantics the manifest tests evaluate on it
(NetworkPolicy ingress, label selectors). Shared by the tests that read the manifests."""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

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


def webhook_args(docs: tuple[dict[str, Any], ...]) -> list[str]:
    dep = find(docs, "Deployment", "gpufabric-webhook")
    return list(dep["spec"]["template"]["spec"]["containers"][0]["args"])


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
