"""A kubelet stand-in for a control plane without kubelets (shared/tools/README.md): it confirms
deletions (a pod with a deletionTimestamp is force-deleted, as a kubelet confirms a stopped pod)
and, in the namespaces it is told, marks bound pods Running and Ready (the Eviction API counts
budgets only for Running pods; the disruption controller counts Ready ones as healthy)."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)


class KubeletStandIn:
    def __init__(self, api_client: client.ApiClient) -> None:
        self._core = client.CoreV1Api(api_client)
        self._stop = threading.Event()
        self._running: set[str] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="kubelet-stand-in", daemon=True)

    def start(self) -> KubeletStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)

    def run_pods_in(self, namespace: str) -> None:
        """From now on, bound pods of `namespace` are marked Running and Ready (and those bound
        already, at the next event or resync)."""
        with self._lock:
            self._running.add(namespace)
        for pod in self._core.list_namespaced_pod(namespace).items:
            self._handle(pod)

    def forget(self, namespace: str) -> None:
        with self._lock:
            self._running.discard(namespace)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                listed = self._core.list_pod_for_all_namespaces()
                for pod in listed.items:
                    self._handle(pod)
                # Short watches: stop() is noticed within seconds, and a resync covers misses.
                for event in watch.Watch().stream(
                    self._core.list_pod_for_all_namespaces,
                    resource_version=listed.metadata.resource_version,
                    timeout_seconds=5,
                ):
                    if self._stop.is_set():
                        return
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._handle(event["object"])
            except Exception as err:  # noqa: BLE001 - 410, a closed stream: list again
                if not self._stop.is_set():
                    log.info("kubelet stand-in relists", extra={"error": str(err)})
                    self._stop.wait(0.5)

    def _handle(self, pod: Any) -> None:
        meta, spec, status = pod.metadata, pod.spec, pod.status
        try:
            if meta.deletion_timestamp is not None:
                self._core.delete_namespaced_pod(
                    meta.name,
                    meta.namespace,
                    grace_period_seconds=0,
                    body=client.V1DeleteOptions(grace_period_seconds=0),
                )
                return
            with self._lock:
                wanted = meta.namespace in self._running
            if wanted and spec.node_name and (status.phase or "Pending") == "Pending":
                self._core.patch_namespaced_pod_status(meta.name, meta.namespace, running())
        except ApiException as err:
            if err.status not in (404, 409, 422):  # gone, or changed meanwhile: next event
                log.warning("kubelet stand-in failed", extra={"pod": meta.name, "error": str(err)})


def running() -> dict[str, Any]:
    """The status a kubelet reports for a started pod."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [
        {"type": t, "status": "True", "lastTransitionTime": now}
        for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
    ]
    return {"status": {"phase": "Running", "startTime": now, "conditions": conditions}}
