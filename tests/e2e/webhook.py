"""`gpufabric-webhook serve --labeler --placer` as a subprocess with exactly its Deployment's
identity: the ServiceAccount gpufabric-webhook's TokenRequest token, POD_NAMESPACE of the install,
its own free ports. Its log is kept in a file for the test report."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.cluster import Cluster, free_port
from tests.e2e.install import NAMESPACE, WEBHOOK_ACCOUNT, Serving
from tests.e2e.waits import wait_until

DEFAULT_ARGS = ("--labeler", "--placer")  # what daemonset/base/webhook/deployment.yaml runs


def command() -> list[str]:
    """The console script beside this interpreter (the installed entry point), else -m."""
    script = Path(sys.executable).parent / "gpufabric-webhook"
    if script.is_file():
        return [str(script)]
    found = shutil.which("gpufabric-webhook")
    return [found] if found else [sys.executable, "-m", "webhook"]


@dataclass
class Webhook:
    process: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    log: Path
    _mark: int = field(default=0)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/mutate"

    def mark(self) -> None:
        """Remember where the log stands (a failing test prints what came after)."""
        self._mark = self.log.stat().st_size if self.log.exists() else 0

    def log_since_mark(self, limit: int = 20000) -> str:
        data = self.log.read_bytes()[self._mark :] if self.log.exists() else b""
        return data[-limit:].decode(errors="replace")

    def ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"the webhook exited ({self.process.returncode}): {self.tail()}")
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=2
            ) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def start(
    cluster: Cluster,
    serving: Serving,
    workdir: Path,
    *,
    port: int,
    args: tuple[str, ...] = DEFAULT_ARGS,
    program: Path | None = None,
) -> Webhook:
    """Start serve as the webhook's ServiceAccount on `port` (the one the installed webhook
    configuration calls) and a free metrics port; ready once /readyz says so. `program`: another
    build's gpufabric-webhook (a before/after), else this checkout's (command())."""
    token = cluster.token(WEBHOOK_ACCOUNT, NAMESPACE)
    kubeconfig = cluster.write_kubeconfig(
        workdir / "webhook.kubeconfig",
        token,
        f"system:serviceaccount:{NAMESPACE}:{WEBHOOK_ACCOUNT}",
    )
    metrics = free_port()
    log = workdir / "webhook.log"
    env = {
        **{k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
        "POD_NAMESPACE": NAMESPACE,
        "POD_NAME": "gpufabric-webhook-e2e",
    }
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                *([str(program)] if program is not None else command()),
                "serve",
                f"--port={port}",
                f"--tls-cert={serving.cert}",
                f"--tls-key={serving.key}",
                f"--metrics-port={metrics}",
                f"--kubeconfig={kubeconfig}",
                *args,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    hook = Webhook(process, port, metrics, log)
    try:
        wait_until(hook.ready, 60, "the webhook's /readyz")
    except BaseException:
        stop(hook)
        raise
    return hook


def stop(hook: Webhook) -> None:
    """SIGTERM (serve's clean shutdown), SIGKILL after 10 s."""
    if hook.process.poll() is None:
        hook.process.send_signal(signal.SIGTERM)
        try:
            hook.process.wait(10)
        except subprocess.TimeoutExpired:
            hook.process.kill()
            hook.process.wait(10)
