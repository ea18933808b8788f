"""A real Kubernetes 1.36.2 control plane with gpufabric installed, for the benchmarks that must
meet the real kube-apiserver and kube-scheduler (../shared/tools/k8s: no kubelet, so placed =
bound).

`Cluster.up` starts one (its own state directory and ports), installs the shipped manifests that
make sense without a kubelet (namespace, CRDs, ServiceAccounts, RBAC, policies, the
MutatingWebhookConfiguration pointed at a local `gpufabric-webhook serve --labeler --placer`
running as the webhook's ServiceAccount), creates 8-GPU Node objects and the topology ConfigMap,
and waits until the labeler has labelled every node. `down` stops what `up` started.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from certs.pki import make_ca, make_serving

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT.parent / "shared" / "tools" / "k8s"
KUBECTL = Path.home() / ".cache" / "k8s-1.36.2" / "kubectl"
NS = "gpufabric-system"
SA = "gpufabric-webhook"
# PodGroups (scheduling.k8s.io/v1alpha2) and kube-scheduler's gang and topology-aware workload
# scheduling: alpha in 1.36, off unless asked (both the API server and the scheduler).
GATES = "GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true"
SERVED_API = f"--feature-gates={GATES} --runtime-config=scheduling.k8s.io/v1alpha2=true"
SERVED_SCHED = f"--feature-gates={GATES}"
# PodGroups carry the finalizer scheduling.k8s.io/podgroup-protection: without the controller
# that lifts it (not among up.sh's defaults) a deleted PodGroup, and its namespace, stay forever.
SERVED_CM = {
    "K8S_CM_ARGS": SERVED_SCHED,
    "K8S_CM_CONTROLLERS": "job-controller,garbage-collector-controller,namespace-controller,"
    "serviceaccount-token-controller,disruption-controller,resourceclaim-controller,"
    "podgroup-protection-controller",
}
# Base objects a kubelet-less control plane cannot run (the webhook runs here as a process) or
# that are not the placer's (the agent's DaemonSet, the certificate Job, the Service in front of
# the webhook, its budget).
_SKIP_KINDS = {"Deployment", "DaemonSet", "Job", "Service", "PodDisruptionBudget"}


def topology(spines: int, leaves: int, per_leaf: int) -> str:
    """A static map (nodes.yaml): `spines` x `leaves` leaves of `per_leaf` nodes gpu-001..."""
    out: dict[str, Any] = {"spines": []}
    n = 0
    for s in range(spines):
        rows = []
        for leaf in range(leaves):
            names = [f"gpu-{n + i + 1:03d}" for i in range(per_leaf)]
            n += per_leaf
            rows.append({"name": f"leaf{s * leaves + leaf:02d}", "nodes": names})
        out["spines"].append({"name": f"spine{s}", "leaves": rows})
    return yaml.safe_dump(out)


def node(name: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": {"cpu": "64", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": str(gpus)},
            "allocatable": {
                "cpu": "64",
                "memory": "1Ti",
                "pods": "110",
                "nvidia.com/gpu": str(gpus),
            },
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


@dataclass
class Cluster:
    """One control plane; `base` is its first port (etcd; +10 its peer), then API, scheduler,
    controller manager, webhook, webhook metrics."""

    base: int
    served: bool  # PodGroups and the scheduler's gang scheduling on
    webhook: Path = ROOT / ".venv" / "bin" / "gpufabric-webhook"  # another build: a before/after
    state: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="speed-bench-")))
    kubeconfig: Path = Path()
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def api_port(self) -> int:
        return self.base + 1

    def kubectl(self, *args: str, stdin: str | None = None, config: Path | None = None) -> str:
        cmd = [str(KUBECTL), f"--kubeconfig={config or self.kubeconfig}", *args]
        done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def up(self, nodes: int = 128, leaves: int = 16, spines: int = 2) -> None:
        # Other clusters on this machine take random ports, and our range is in the kernel's
        # ephemeral one (any client's local port): where a port is taken, before or while the
        # components start, move on past it.
        for _ in range(10):
            if all(_free(self.base + i) for i in (*range(6), 10)) and self._start():
                break
            self.base += 20
        else:
            raise RuntimeError(f"no free ports for a control plane up to {self.base}")
        self._install()
        self._serve()
        per_leaf = nodes // leaves
        cm = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gpufabric-topology", "namespace": NS},
            "data": {"nodes.yaml": topology(spines, leaves // spines, per_leaf)},
        }
        items = [node(f"gpu-{i + 1:03d}", 8) for i in range(nodes)]
        body = {"apiVersion": "v1", "kind": "List", "items": [cm, *items]}
        self.kubectl("create", "-f", "-", stdin=json.dumps(body))
        self._wait_labelled(nodes)

    def _start(self) -> bool:
        """up.sh on our ports; False (and stopped) when a component did not stay up."""
        env = dict(
            os.environ,
            K8S_ETCD_PORT=str(self.base),
            K8S_API_PORT=str(self.base + 1),
            K8S_SCHED_PORT=str(self.base + 2),
            K8S_CM_PORT=str(self.base + 3),
        )
        if self.served:
            env |= {"K8S_API_ARGS": SERVED_API, "K8S_SCHED_ARGS": SERVED_SCHED, **SERVED_CM}
        out = subprocess.run(
            ["bash", str(TOOLS / "up.sh"), str(self.state)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode == 0:
            self.kubeconfig = Path(out.stdout.strip().splitlines()[-1])
            time.sleep(2.0)  # a component that cannot listen exits within this
            pids = [int((self.state / f"{c}.pid").read_text()) for c in ("sched", "cm", "api")]
            if all(_alive(p) for p in pids):
                return True
        subprocess.run(["bash", str(TOOLS / "down.sh"), str(self.state)], check=False)
        self.state.mkdir()
        return False

    def _install(self) -> None:
        docs = yaml.safe_load_all(self.kubectl("kustomize", str(ROOT / "daemonset" / "base")))
        keep = [d for d in docs if d and d["kind"] not in _SKIP_KINDS]
        for d in keep:
            if d["kind"] == "MutatingWebhookConfiguration":
                for hook in d["webhooks"]:  # the local process instead of the Service
                    hook["clientConfig"] = {
                        "url": f"https://localhost:{self.base + 4}/mutate",
                        "caBundle": "",
                    }
        self.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(keep))

    def _serve(self) -> None:
        now = dt.datetime.now(dt.UTC)
        ca = make_ca("speed-bench", now)
        pair = make_serving(ca, ["localhost"], now)
        (self.state / "tls.crt").write_bytes(pair.cert_pem)
        (self.state / "tls.key").write_bytes(pair.key_pem)
        bundle = base64.b64encode(ca.cert_pem).decode()
        ops = [
            {"op": "replace", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
            for i in range(2)
        ]
        self.kubectl(
            "patch",
            "mutatingwebhookconfiguration",
            "gpufabric-webhook",
            "--type=json",
            "-p",
            json.dumps(ops),
        )
        token = self.kubectl("create", "token", SA, "-n", NS, "--duration=2h").strip()
        sa_config = self.state / "webhook.kubeconfig"
        # verified against the API server's own certificate, as in a pod (an unverified client
        # warns on every request, and the webhook would spend its time printing that)
        ca = base64.b64encode((self.state / "pki" / "apiserver.crt").read_bytes()).decode()
        text = self.kubeconfig.read_text().replace("token: admintoken", f"token: {token}")
        text = text.replace("insecure-skip-tls-verify: true", f"certificate-authority-data: {ca}")
        sa_config.write_text(text)
        env = dict(os.environ, POD_NAMESPACE=NS, POD_NAME="bench")
        cmd = [
            str(self.webhook),
            "serve",
            "--labeler",
            "--placer",
            f"--port={self.base + 4}",
            f"--metrics-port={self.base + 5}",
            f"--tls-cert={self.state / 'tls.crt'}",
            f"--tls-key={self.state / 'tls.key'}",
            f"--kubeconfig={sa_config}",
        ]
        log = (self.state / "webhook.log").open("wb")
        self.procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))

    def _wait_labelled(self, nodes: int, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            out = self.kubectl("get", "nodes", "-l", "gpufabric.io/leaf-quad", "-o", "name")
            if len(out.split()) >= nodes:
                return
            time.sleep(0.5)
        raise RuntimeError(f"nodes not labelled in {timeout:.0f} s; see {self.state}/webhook.log")

    def down(self, logs: Path | None = None) -> None:
        """Stop it; `logs`: keep its logs there first."""
        for p in self.procs:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if logs is not None:
            keep = logs / str(self.base)
            keep.mkdir(parents=True, exist_ok=True)
            for f in self.state.glob("*.log"):
                shutil.copy(f, keep / f.name)
        subprocess.run(["bash", str(TOOLS / "down.sh"), str(self.state)], check=False)
        shutil.rmtree(self.state, ignore_errors=True)
