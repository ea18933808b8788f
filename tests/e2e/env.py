"""One installed cluster for the tier: the control plane, daemonset/base as installed, the webhook
running as its ServiceAccount and the kubelet stand-in; brought up and down as one (conftest.py
shares one per kind of cluster across the session). Namespaces made for a test are removed whole
by `drop_namespace`."""

from __future__ import annotations

import functools
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e import cluster as k8s
from tests.e2e import install
from tests.e2e import webhook as serve
from tests.e2e.kubelet import KubeletStandIn
from tests.e2e.waits import wait_until


@dataclass(frozen=True)
class Env:
    cluster: k8s.Cluster
    webhook: serve.Webhook
    kubelet: KubeletStandIn
    workdir: Path
    dropped: list[str] = field(default_factory=list)  # namespaces deleted, maybe still finalizing

    @functools.cached_property
    def admin(self) -> client.ApiClient:
        """One admin client for the test side (a connection pool of its own)."""
        return self.cluster.client()

    @functools.cached_property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.admin)

    def new_namespace(self, hint: str) -> str:
        """A namespace of its own (the name says which test made it)."""
        short = re.sub(r"[^a-z0-9-]+", "-", hint.lower())[:40].strip("-")
        name = f"e2e-{short}-{uuid.uuid4().hex[:5]}"
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        return name

    def drop_namespace(self, name: str, timeout: float = 90) -> None:
        """Delete the namespace; return once its pods are gone (the capacity the next test
        needs). Its pods go first, force-deleted as a kubelet confirms them, so the namespace
        controller finds it empty at its first look; tear_down() waits for the namespaces
        themselves (~5 s each of the controller's own pace, not worth waiting test by test)."""
        self.kubelet.forget(name)
        try:
            # Jobs first, or their controller replaces the pods deleted below.
            client.BatchV1Api(self.admin).delete_collection_namespaced_job(
                name, propagation_policy="Background"
            )
            self.core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
            wait_until(
                lambda: not self.core.list_namespaced_pod(name).items,
                timeout,
                f"pods of {name} deleted",
            )
            self.core.delete_namespace(name)
        except ApiException as err:
            if err.status != 404:
                raise
        self.dropped.append(name)

    def wait_dropped(self, timeout: float = 90) -> None:
        """Until every namespace a test dropped is gone: nothing is left behind."""
        wait_until(
            lambda: not [n for n in self.dropped if _exists(self.core, n)],
            timeout,
            f"namespaces {self.dropped} deleted",
        )


def _exists(core: client.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespace(name)
    except ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


def installed(cluster: k8s.Cluster, workdir: Path, program: Path | None = None) -> serve.Webhook:
    """daemonset/base installed on `cluster` as the tier installs it (install.as_installed), its
    webhooks calling `gpufabric-webhook serve --labeler --placer` started here as the webhook's
    ServiceAccount (`program`: another build's, see webhook.start); ready once it answers."""
    serving = install.serving_certs(workdir)
    port = k8s.free_port()
    url = f"https://127.0.0.1:{port}/mutate"
    install.install(cluster, install.as_installed(install.rendered(cluster), url, serving.ca_pem))
    return serve.start(cluster, serving, workdir, port=port, program=program)


def bring_up(tools: Path, workdir: Path, *, gang: bool = False) -> Env:
    """A control plane (PodGroups served when `gang`), daemonset/base as installed, the webhook
    as its ServiceAccount, the kubelet stand-in. tear_down() undoes all of it."""
    cluster = k8s.start(tools, k8s.GANG if gang else k8s.PLAIN)
    kubelet: KubeletStandIn | None = None
    try:
        kubelet = KubeletStandIn(cluster.client()).start()
        hook = installed(cluster, workdir)
    except BaseException:
        if kubelet is not None:
            kubelet.stop()
        k8s.stop(cluster)
        raise
    return Env(cluster, hook, kubelet, workdir)


def tear_down(env: Env) -> None:
    """Everything bring_up() started is stopped, even when a namespace was left behind (which
    then fails the session's last test)."""
    try:
        env.wait_dropped()
    finally:
        serve.stop(env.webhook)
        env.kubelet.stop()
        k8s.stop(env.cluster)
