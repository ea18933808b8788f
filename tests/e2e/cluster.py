"""A real Kubernetes control plane for the end-to-end tier: found, started on free ports, reached
as admin or as a ServiceAccount, stopped.

The control plane is `up.sh`/`down.sh` from $GPUFABRIC_E2E_K8S, else ../shared/tools/k8s/ beside
the clone (shared/tools/README.md: etcd, kube-apiserver, kube-scheduler, kube-controller-manager,
no kubelet). Reusable on its own: bench/ and other tests import `find_tools`, `start`, `stop`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml
from kubernetes import client

from tests import reference

ROOT = Path(__file__).resolve().parents[2]
TOOLS_ENV = "GPUFABRIC_E2E_K8S"
SHARED_TOOLS = reference.K8S_TOOLS
ADMIN_TOKEN = "admintoken"  # up.sh's token file: user admin in system:masters
# up.sh's own --controllers (its header): those that make sense without a kubelet. Flags.controllers
# adds to these (K8S_CM_CONTROLLERS replaces the whole list).
CONTROLLERS = (
    "job-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-token-controller",
    "disruption-controller",
    "resourceclaim-controller",
)


@dataclass(frozen=True, slots=True)
class Flags:
    """What a control plane runs beyond up.sh's defaults: feature gates (given alike to the API
    server, the scheduler and the controller manager, one --feature-gates each), more flags per
    component, more controllers."""

    gates: tuple[str, ...] = ()
    api_args: tuple[str, ...] = ()
    sched_args: tuple[str, ...] = ()
    cm_args: tuple[str, ...] = ()
    controllers: tuple[str, ...] = ()

    def env(self) -> dict[str, str]:
        """up.sh's environment for these flags."""
        gates = (f"--feature-gates={','.join(f'{g}=true' for g in self.gates)}",)
        on = gates if self.gates else ()
        out = {
            "K8S_API_ARGS": " ".join((*on, *self.api_args)),
            "K8S_SCHED_ARGS": " ".join((*on, *self.sched_args)),
            "K8S_CM_ARGS": " ".join((*on, *self.cm_args)),
        }
        if self.controllers:
            out["K8S_CM_CONTROLLERS"] = ",".join((*CONTROLLERS, *self.controllers))
        return out


# The controller that type-checks ValidatingAdmissionPolicies into status.typeChecking (tests/e2e/
# test_denied.py asserts the shipped ones check clean); it only writes policy status.
PLAIN = Flags(controllers=("validatingadmissionpolicy-status-controller",))
# PodGroups (scheduling.k8s.io/v1alpha2 on 1.36) served, kube-scheduler's gang scheduling, and the
# controller that lifts a PodGroup's finalizer scheduling.k8s.io/podgroup-protection once it is
# deleted and no pod names it (without it, a deleted PodGroup and its namespace stay for good).
GANG = Flags(
    gates=("GenericWorkload", "GangScheduling"),
    api_args=("--runtime-config=scheduling.k8s.io/v1alpha2=true",),
    controllers=("podgroup-protection-controller",),
)


@dataclass(frozen=True, slots=True)
class Tools:
    """Where up.sh/down.sh are, or why there are none (`reason`, naming the paths looked at)."""

    path: Path | None
    reason: str


def find_tools(env: dict[str, str] | None = None, shared: Path = SHARED_TOOLS) -> Tools:
    env = dict(os.environ) if env is None else env
    looked = [Path(env[TOOLS_ENV])] if env.get(TOOLS_ENV) else []
    looked.append(shared)
    for path in looked:
        if (path / "up.sh").is_file() and (path / "down.sh").is_file():
            return Tools(path, "")
    where = " nor ".join(str(p) for p in looked)
    return Tools(None, f"no Kubernetes control plane for the e2e tier: no up.sh/down.sh in {where}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _etcd_port() -> int:
    """A free port whose +10 (etcd's peer port, as up.sh takes it) is free too."""
    for _ in range(50):
        port = free_port()
        if port + 10 > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 10))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair for etcd (port, port+10) in 50 tries")


def _bin_dir(env: dict[str, str]) -> Path:
    """Where up.sh unpacks the binaries (its own rule), for the matching kubectl."""
    if env.get("K8S_BIN"):
        return Path(env["K8S_BIN"])
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "k8s-1.36.2"


@dataclass(frozen=True, slots=True)
class Cluster:
    state: Path
    api_port: int
    tools: Path
    kubectl_path: Path

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def ca(self) -> Path:
        """The API server's self-signed certificate and its CA (one file, as it writes them)."""
        return self.state / "pki" / "apiserver.crt"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.state / "kubeconfig"

    def client(self, token: str = ADMIN_TOKEN) -> client.ApiClient:
        """An API client of its own (no global configuration), verifying the server's CA."""
        cfg = client.Configuration()
        cfg.host = self.server
        cfg.ssl_ca_cert = str(self.ca)
        cfg.api_key = {"authorization": f"Bearer {token}"}
        return client.ApiClient(cfg)

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 60.0) -> str:
        """kubectl as admin: its stdout; a failure raises with kubectl's own message."""
        out = self.kubectl_run(*args, stdin=stdin, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def kubectl_run(
        self, *args: str, stdin: str | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """kubectl as admin, whatever it answers (stderr holds the API's warnings)."""
        return subprocess.run(
            [str(self.kubectl_path), f"--kubeconfig={self.admin_kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def token(
        self, account: str, namespace: str, *, node: str | None = None, seconds: int = 7200
    ) -> str:
        """A TokenRequest token of ServiceAccount `account`, as a pod of it gets one; `node`: bound
        to that Node (`--bound-object-kind Node`), so it carries the node name a DaemonSet pod's
        token carries (authentication.kubernetes.io/node-name)."""
        core = client.CoreV1Api(self.client())
        bound = None
        if node is not None:
            uid = core.read_node(node).metadata.uid
            bound = client.V1BoundObjectReference(api_version="v1", kind="Node", name=node, uid=uid)
        spec = client.V1TokenRequestSpec(
            audiences=[], expiration_seconds=seconds, bound_object_ref=bound
        )
        made = core.create_namespaced_service_account_token(
            account, namespace, client.AuthenticationV1TokenRequest(spec=spec)
        )
        return str(made.status.token)

    def write_kubeconfig(self, path: Path, token: str, user: str) -> Path:
        """A kubeconfig for `token` (what a program given --kubeconfig or KUBECONFIG reads)."""
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "e2e",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca)},
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
            "current-context": "e2e",
        }
        path.write_text(yaml.safe_dump(doc))
        path.chmod(0o600)
        return path


def start(tools: Path, flags: Flags = PLAIN, *, prefix: str | None = None) -> Cluster:
    """A control plane of its own, running `flags` (free ports; state under /tmp/<prefix>*, by
    default named after the checkout, /tmp/<clone>-k8s-*, so whose cluster it is shows); stop()
    ends it."""
    state = Path(tempfile.mkdtemp(prefix=prefix or f"{ROOT.name}-k8s-", dir="/tmp"))
    api = free_port()
    env = {
        **os.environ,
        "K8S_ETCD_PORT": str(_etcd_port()),
        "K8S_API_PORT": str(api),
        "K8S_SCHED_PORT": str(free_port()),
        "K8S_CM_PORT": str(free_port()),
        **flags.env(),
    }
    out = subprocess.run(
        ["bash", str(tools / "up.sh"), str(state)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    cluster = Cluster(state, api, tools, _bin_dir(env) / "kubectl")
    if out.returncode != 0:
        logs = {n: _tail(state / f"{n}.log") for n in ("etcd", "api", "sched", "cm")}
        stop(cluster)
        raise RuntimeError(f"up.sh failed ({out.returncode}): {out.stderr.strip()}; logs: {logs}")
    return cluster


def stop(cluster: Cluster) -> None:
    """down.sh: stops exactly what up.sh started and removes the state directory."""
    subprocess.run(
        ["bash", str(cluster.tools / "down.sh"), str(cluster.state)],
        capture_output=True,
        timeout=120,
        check=False,
    )


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
