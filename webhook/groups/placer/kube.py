"""The placer's Kubernetes I/O: list+watch Pods and Nodes, patch pods, post Events.

The only module of the package that imports kubernetes. `run_placer` is the `work(stop)` the
leader elector runs while this replica holds the `gpufabric-placer` Lease: one thread applies
events and decides, so the placer's state needs no locks.
"""

from __future__ import annotations

import copy
import datetime
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.groups.extensions.gang.names import PODGROUPS
from webhook.groups.extensions.gang.place import NativeGang
from webhook.groups.extensions.imex.extension import ImexChannels
from webhook.groups.extensions.imex.names import COMPUTE_DOMAINS
from webhook.groups.extensions.imex.place import ImexMetrics
from webhook.groups.extensions.partly.bound import BoundMetrics, PartlyBound
from webhook.groups.extensions.preempt.extension import Preemption
from webhook.groups.extensions.preempt.state import PreemptMetrics
from webhook.groups.framework.evictions import Outcome
from webhook.groups.framework.ownedkube import KubeOwnedApi
from webhook.groups.framework.points import Feeds, Put, Watch
from webhook.groups.framework.refusals import Rejected
from webhook.groups.framework.timeouts import TIMEOUT, WRITE_TIMEOUT
from webhook.groups.framework.writes import Call, NotWritten, Quiet
from webhook.groups.model.names import PLACER_FIELD_MANAGER
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.placer import TICK_EVERY, Placer, PlacerMetrics
from webhook.groups.placer.slim import slim_node, slim_pod
from webhook.kube.client import let_go, pages, watch_events
from webhook.kube.status import status_words
from webhook.kube.watch import Lister, ListWatch, Obj, Page, Paged, Watcher

log = logging.getLogger(__name__)
_POLL = 0.5
_WRITERS = 64  # a reconcile's patches in flight at once: a gang of 32 ungated in one round trip
_TELLERS = 2  # Events posted at once
# The Events of each member placed, as many as the burst's patches: posted once no patch is in
# flight (framework/writes.Quiet); every other Event (preemption, refusals) as it happens
_AFTER_WRITES = frozenset({"GroupPlaced", "GroupRankMoved"})
_TICK = 5.0  # seconds between retries of groups that are still gated
_LIVE = "status.phase!=Succeeded,status.phase!=Failed"  # terminal pods hold no GPUs


def _interned(obj: dict[str, Any]) -> Obj:
    """One copy of each label key and value: JSON decoding gives every Node its own, and at
    65,536 Nodes that is ~1.5 KB a Node of equal strings."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and isinstance(labels := meta.get("labels"), dict):
        meta["labels"] = {
            sys.intern(k): sys.intern(v) if type(v) is str else v for k, v in labels.items()
        }
    return obj


def core_list_watch(
    api_client: client.ApiClient, kind: str, field_selector: str = ""
) -> tuple[Lister, Watcher]:
    core = client.CoreV1Api(api_client)
    method = core.list_pod_for_all_namespaces if kind == "pods" else core.list_node
    slim = slim_pod if kind == "pods" else slim_node

    def fetch(token: str | None) -> Any:
        return method(
            limit=500,
            _continue=token,
            field_selector=field_selector or None,
            _preload_content=False,
            _request_timeout=TIMEOUT * 3,
        )

    def lister() -> Iterator[Page]:
        return pages(fetch, lambda o: _interned(slim(o)))  # each page slimmed as it arrives

    def watcher(version: str) -> Iterable[Obj]:
        for event in watch_events(method, version=version, field_selector=field_selector or None):
            obj = event["object"]
            if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                obj = slim(obj)
            yield {"type": event["type"], "object": obj}

    return lister, watcher


class KubePlacerApi:
    def __init__(self, api_client: client.ApiClient) -> None:
        # Its own connections, as many as writes in flight (groups/framework/writes.py): the shared
        # client keeps cpu_count * 5 idle, and each one more would be a TLS handshake again.
        conf = copy.deepcopy(api_client.configuration)
        conf.connection_pool_maxsize = _WRITERS + _TELLERS
        self.core = client.CoreV1Api(client.ApiClient(conf))
        self._writers = ThreadPoolExecutor(_WRITERS, thread_name_prefix="placer-write")
        # Events are best effort and wait for nothing: off the placer's thread (_AFTER_WRITES
        # on threads of their own, after the burst's patches)
        self._tellers = ThreadPoolExecutor(_TELLERS, thread_name_prefix="placer-event")
        self._later = ThreadPoolExecutor(_TELLERS, thread_name_prefix="placer-event-later")
        self._quiet = Quiet()
        self._nominate_refused = False  # said once

    def start_all(
        self,
        calls: Sequence[Call],
        stopping: Callable[[], bool],
        answer: Callable[[int, object], None],
    ) -> None:
        """writes.Starter: at most _WRITERS calls at a time, none started once `stopping()`; each
        answer handed on as it comes, nothing waited for."""

        def answered(i: int) -> Callable[[Future[object]], None]:
            return lambda future: answer(i, future.result())

        for i, call in enumerate(calls):
            self._writers.submit(self._one, call, stopping).add_done_callback(answered(i))

    def _one(self, call: Call, stopping: Callable[[], bool]) -> object:
        if stopping():
            return NotWritten("the placer is stopping")
        self._quiet.begin()
        try:
            return call()
        except Exception as err:  # noqa: BLE001 - handed to the write's done
            return err
        finally:
            self._quiet.end()

    def patch_pod(
        self, namespace: str, name: str, ops: list[dict[str, Any]], dry_run: bool = False
    ) -> None:
        """A JSONPatch of a pod; `dry_run`: dryRun=All, which runs the webhooks and admission
        policies and stores nothing. Any 4xx is Rejected with the API server's message (422:
        a ValidatingAdmissionPolicy or a failed `test` op; 404: the pod is gone)."""
        try:
            answer = self.core.patch_namespaced_pod(
                name,
                namespace,
                ops,
                field_manager=PLACER_FIELD_MANAGER,
                dry_run="All" if dry_run else None,
                _content_type="application/json-patch+json",
                _request_timeout=WRITE_TIMEOUT,
                _preload_content=False,  # the answer is not decoded: the watch brings the pod
            )
            let_go(answer)
        except ApiException as err:
            if err.status is None or not 400 <= err.status < 500:
                raise
            write, what = "pods/patch", f"placement patch of pod {namespace}/{name}"
            if dry_run:
                write, what = "pods/patch-dry-run", f"{what} (dry run)"
            words = status_words(err.status, err.body)
            raise Rejected(write, what, err.status, words, name) from err

    def nominate(self, namespace: str, name: str, node: str) -> None:
        """status.nominatedNodeName of a pending pod (RBAC: pods/status patch; the policy
        gpufabric-placer-pod-status allows that field alone). A hint: a refusal or a lost
        answer is logged (a refusal once: an install whose RBAC predates it) and the member is
        ungated anyway, kube-scheduler then searching its domain itself."""
        try:
            answer = self.core.patch_namespaced_pod_status(
                name,
                namespace,
                {"status": {"nominatedNodeName": node}},
                field_manager=PLACER_FIELD_MANAGER,
                _content_type="application/merge-patch+json",
                _request_timeout=WRITE_TIMEOUT,
                _preload_content=False,  # not decoded: the watch brings the pod
            )
            let_go(answer)
        except Exception as err:  # noqa: BLE001 - a hint lost; the ungating goes on
            status = err.status if isinstance(err, ApiException) else None
            if status is None or not 400 <= status < 500:
                log.warning(
                    "nominatedNodeName not set",
                    extra={"pod": f"{namespace}/{name}", "error": str(err)},
                )
            elif not self._nominate_refused:
                self._nominate_refused = True
                log.warning(
                    "nominatedNodeName not set; kube-scheduler searches the group's domain"
                    " itself (said once)",
                    extra={
                        "pod": f"{namespace}/{name}",
                        "status": status,
                        "why": status_words(status, getattr(err, "body", None)),
                    },
                )

    def evict_pod(
        self, namespace: str, name: str, dry_run: bool = False, uid: str = ""
    ) -> tuple[Outcome, str]:
        """policy/v1 Eviction (RBAC: pods/eviction create): the API server honours
        PodDisruptionBudgets (429) and marks the pod DisruptionTarget (EvictionByEvictionAPI);
        `dry_run` asks the same question and evicts nothing (deleteOptions.dryRun ["All"]);
        `uid`: only that pod (a precondition: another pod of the name now is "gone", 409).
        Any other failure (500: the pod is under two budgets; 403; a timeout) refuses too, so
        a plan stops instead of going on with part of its victims."""
        body: Any = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        options: dict[str, Any] = {}
        if dry_run:
            options["dryRun"] = ["All"]
        if uid:
            options["preconditions"] = {"uid": uid}
        if options:
            body["deleteOptions"] = options
        try:
            self.core.create_namespaced_pod_eviction(
                name, namespace, body, _request_timeout=WRITE_TIMEOUT
            )
        except ApiException as err:
            if err.status == 409 and uid:
                return "gone", ""
            return eviction_outcome(err.status, err.body)
        except Exception as err:  # noqa: BLE001 - a lost answer: the plan stops here
            return "blocked", f"no answer from the API server: {err}"
        return "evicted", ""

    def event(self, pod: Mapping[str, Any], reason: str, message: str, kind: str) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if reason in _AFTER_WRITES:  # one a member placed: after the burst's patches
            self._later.submit(self._later_event, pod, reason, message, kind, now, time.monotonic())
        else:  # preemption, refusals, waiting: told as they happen
            self._tellers.submit(self._event, pod, reason, message, kind, now)

    def _later_event(
        self, pod: Mapping[str, Any], reason: str, message: str, kind: str, now: str, told: float
    ) -> None:
        self._quiet.wait(told)
        self._event(pod, reason, message, kind, now)

    def _event(
        self, pod: Mapping[str, Any], reason: str, message: str, kind: str, now: str
    ) -> None:
        meta = pod["metadata"]
        body: Any = {
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": PLACER_FIELD_MANAGER},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            answer = self.core.create_namespaced_event(
                meta["namespace"], body, _request_timeout=WRITE_TIMEOUT, _preload_content=False
            )
            let_go(answer)
        except ApiException as err:  # an Event is best effort; the decision stands
            log.warning("event not posted", extra={"pod": meta["name"], "status": err.status})
        except Exception as err:  # noqa: BLE001 - a lost answer loses only the Event
            log.warning("event not posted", extra={"pod": meta["name"], "error": str(err)})


def eviction_outcome(code: int, body: object) -> tuple[Outcome, str]:
    """An Eviction answer: 201 evicted, 404 gone (already deleted); anything else refused, with
    the Status message and its causes (a PodDisruptionBudget names itself in a cause; 429)."""
    if code == 404:
        return "gone", ""
    if 200 <= code < 300:
        return "evicted", ""
    return "blocked", status_words(code, body)


def budget_list_watch(api_client: client.ApiClient) -> tuple[Lister, Watcher]:
    """policy/v1 PodDisruptionBudgets of every namespace (RBAC: list, watch), as the scheduler's
    preemption watches them."""
    policy = client.PolicyV1Api(api_client)
    method = policy.list_pod_disruption_budget_for_all_namespaces

    def fetch(token: str | None) -> Any:
        return method(
            limit=500, _continue=token, _preload_content=False, _request_timeout=TIMEOUT * 3
        )

    def lister() -> Iterator[Page]:
        return pages(fetch, lambda o: o)

    def watcher(version: str) -> Iterable[Obj]:
        yield from watch_events(method, version=version)

    return lister, watcher


def start_watches(watches: Iterable[Watch], stop: threading.Event) -> list[threading.Thread]:
    """Each watch on a daemon thread of its name, running until `stop` is set."""
    threads = [
        threading.Thread(target=w.run, args=(stop,), name=w.name, daemon=True) for w in watches
    ]
    for t in threads:
        t.start()
    return threads


# The placer's own inputs, each applied on its one thread: (start, page, done, event)
Applier = tuple[
    Callable[[], None],
    Callable[[list[Obj]], None],
    Callable[[], None],
    Callable[[str, Obj], None],
]


def _applied(name: str, pair: tuple[Lister, Watcher], put: Put, to: Applier) -> ListWatch:
    """A list+watch whose pages and events go to the placer through `put` (its inbox)."""
    start, page, done, event = to
    return ListWatch(
        name,
        *pair,
        on_list=Paged(
            lambda: put(start), lambda items: put(lambda: page(items)), lambda: put(done)
        ),
        on_event=lambda kind, obj: put(lambda: event(kind, obj)),
    )


def run_placer(
    api_client: client.ApiClient,
    stop: threading.Event,
    metrics: PlacerMetrics | None = None,
    gauges: Callable[[Placer], None] = lambda _: None,
    imex_metrics: ImexMetrics | None = None,
) -> None:
    """work(stop): list+watch Pods and Nodes, decide, patch; returns when `stop` is set."""
    api = KubePlacerApi(api_client)
    ext = Extensions(  # each with its API and metrics; their watches below
        Preemption(api, metrics if isinstance(metrics, PreemptMetrics) else None),
        ImexChannels(
            KubeOwnedApi(api_client, COMPUTE_DOMAINS), imex_metrics
        ),  # groups' ComputeDomains
        NativeGang(KubeOwnedApi(api_client, PODGROUPS)),  # PodGroups
        PartlyBound(api, metrics if isinstance(metrics, BoundMetrics) else None),
    )
    placer = Placer(api, metrics=metrics, extensions=ext, tick_every=TICK_EVERY)
    inbox: queue.Queue[Callable[[], None]] = queue.Queue()
    # a reconcile's writes are not waited for: their answers come back through the inbox
    placer.writes.start, placer.writes.post = api.start_all, inbox.put
    watches = [
        # the extensions' own (framework/points.py Watches), in the one list's order
        *placer.points.watches(Feeds(api_client, inbox.put, placer.retry_all)),
        # page by page: 65,536 slim Nodes are ~110 MiB gathered; each pod kept as its record only
        _applied(
            "placer-nodes",
            core_list_watch(api_client, "nodes"),
            inbox.put,
            (placer.nodes_start, placer.nodes_page, placer.nodes_done, placer.node_event),
        ),
        _applied(
            "placer-budgets",
            budget_list_watch(api_client),
            inbox.put,
            (placer.budgets_start, placer.budgets_page, placer.budgets_done, placer.budget_event),
        ),
        _applied(
            "placer-pods",
            core_list_watch(api_client, "pods", _LIVE),
            inbox.put,
            (placer.pods_start, placer.pods_page, placer.pods_done, placer.pod_event),
        ),
    ]
    start_watches(watches, stop)
    next_retry = time.monotonic() + _TICK
    while not stop.is_set():
        try:
            inbox.get(timeout=_POLL)()
            while not inbox.empty() and not stop.is_set():  # apply the burst, then decide once
                inbox.get_nowait()()
        except queue.Empty:
            pass
        if time.monotonic() >= next_retry:
            placer.retry_all()  # the periodic retry: nothing stays gated by a lost event
            next_retry = time.monotonic() + _TICK
        placer.reconcile(stop.is_set)
        gauges(placer)
