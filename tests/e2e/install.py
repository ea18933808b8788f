"""daemonset/base installed the way an operator installs it, changed in two ways only: no
workloads (nothing would run them: no kubelet) and the webhooks called on loopback, where the test's
`gpufabric-webhook serve` listens, with a CA bundle made by the project's own certs/ code."""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from certs.pki import make_ca, make_serving
from common import api
from tests.e2e.cluster import ROOT, Cluster
from tests.e2e.waits import wait_until

BASE = ROOT / "daemonset" / "base"
# What a kubelet would run; the tier runs the webhook and the agent's writes itself.
WORKLOADS = frozenset({"DaemonSet", "Deployment", "Job"})
NAMESPACE = api.DEFAULT_NAMESPACE
WEBHOOK_ACCOUNT = "gpufabric-webhook"
AGENT_ACCOUNT = "gpufabric-agent"


@dataclass(frozen=True, slots=True)
class Serving:
    cert: Path
    key: Path
    ca_pem: bytes


def serving_certs(directory: Path) -> Serving:
    """A CA and a serving certificate for 127.0.0.1 (certs/pki.py, as the bootstrap Job makes)."""
    now = dt.datetime.now(dt.UTC)
    ca = make_ca("gpufabric-e2e-ca", now)
    pair = make_serving(ca, ["localhost", "127.0.0.1"], now)
    cert, key = directory / "tls.crt", directory / "tls.key"
    cert.write_bytes(pair.cert_pem)
    key.write_bytes(pair.key_pem)
    key.chmod(0o600)
    return Serving(cert, key, ca.cert_pem)


def rendered(cluster: Cluster) -> list[dict[str, Any]]:
    """`kubectl kustomize daemonset/base`, unchanged."""
    text = cluster.kubectl("kustomize", str(BASE))
    return [d for d in yaml.safe_load_all(text) if d]


def as_installed(docs: list[dict[str, Any]], url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """The documents minus the workloads, every webhook's clientConfig pointed at `url`."""
    out = []
    bundle = base64.b64encode(ca_pem).decode()
    for doc in docs:
        if doc["kind"] in WORKLOADS:
            continue
        if doc["kind"] == "MutatingWebhookConfiguration":
            doc = json.loads(json.dumps(doc))  # a copy: the rendered list stays as shipped
            for hook in doc["webhooks"]:
                hook["clientConfig"] = {"url": url, "caBundle": bundle}
        out.append(doc)
    return out


def install(cluster: Cluster, docs: list[dict[str, Any]]) -> None:
    """Server-side apply as admin (an operator's `kubectl apply --server-side -k`), then wait for
    the CRDs to be served."""
    stream = "\n---\n".join(yaml.safe_dump(d) for d in docs)
    cluster.kubectl(
        "apply", "--server-side", "--field-manager=e2e-install", "-f", "-", stdin=stream
    )
    crds = [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"]
    cluster.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{n}" for n in crds)
    )
    # The ServiceAccounts' tokens come from TokenRequest; wait until the accounts exist.
    wait_until(
        lambda: all(
            _exists(cluster, "serviceaccount", NAMESPACE, a)
            for a in (WEBHOOK_ACCOUNT, AGENT_ACCOUNT)
        ),
        30,
        "the installed ServiceAccounts",
    )


def _exists(cluster: Cluster, kind: str, namespace: str, name: str) -> bool:
    try:
        cluster.kubectl("get", kind, "-n", namespace, name, "-o", "name")
    except RuntimeError:
        return False
    return True
