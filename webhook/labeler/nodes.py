"""Node labels from GpuNodeStatus summaries (plus extra labels, e.g. network position), kept by
server-side apply with field manager gpufabric-labeler.

Watches feed the Labeler from any thread (statuses, Nodes); it remembers what each node should
carry and marks nodes whose labels differ. Only `work(stop)`, run by the leader-elected worker,
writes: it converges every node once when it starts, then each node marked since. A Node that is
created again, or whose labels somebody else removed or overwrote, shows up on the Node watch and
is repaired; a node already carrying exactly the wanted labels costs no request.

Applying exactly the wanted set under our own field manager removes labels we set earlier and no
longer want, and leaves everybody else's labels alone.

The NVLink domain label comes from the status's GPUs, else the Node's own `nvidia.com/gpu.clique`
(common.nvlink); a node whose GPUs disagree or are still forming gets none, and the leader says why
in a Warning Event on the Node, once per reason.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from common import api, nvlink
from common.labels import labels_for
from common.model import NodeStatus
from common.wire import WireError

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]
Extra = Callable[[str], Mapping[str, str]]
Report = Callable[[str, str, str], None]  # (node, reason, message): a Warning Event on the Node
NO_NVLINK_DOMAIN = "NoNVLinkDomain"


class NodeApi(Protocol):
    def apply_labels(self, name: str, labels: Mapping[str, str]) -> None:
        """SSA metadata.labels on the Node as gpufabric-labeler (force)."""
        ...


class LabelRejected(Exception):
    """The API server refused these labels for good (422 invalid value, 403 RBAC): do not
    retry until something changes."""


class NodeGone(LabelRejected):
    """The Node was deleted before its labels were applied (an apply would have been a create,
    which the labeler may not do): nothing to label, and nothing to warn about."""


def no_extra(name: str) -> Mapping[str, str]:
    return {}


def no_report(name: str, reason: str, message: str) -> None:
    pass


def wanted_labels(status: Mapping[str, Any] | None) -> dict[str, str]:
    """The labels of the status's summary, but the NVLink domain: that one the labeler resolves
    with the Node's clique label (`Labeler._domain`)."""
    if not status:
        return {}
    summary = NodeStatus.from_dict(status).summary
    return labels_for(dataclasses.replace(summary, nvlink_domain=None))


def ours(labels: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k.startswith(api.LABEL_PREFIX)}


def owned_labels(meta: Mapping[str, Any]) -> dict[str, str]:
    """The labels our field manager holds on a Node, from metadata.managedFields. Without
    managedFields every gpufabric.io label counts as ours."""
    labels = meta.get("labels") or {}
    entries = meta.get("managedFields")
    if entries is None:
        return ours(labels)
    keys: set[str] = set()
    for entry in entries:
        if entry.get("manager") == api.LABELER_FIELD_MANAGER and entry.get("operation") == "Apply":
            fields = ((entry.get("fieldsV1") or {}).get("f:metadata") or {}).get("f:labels") or {}
            keys |= {k[2:] for k in fields if k.startswith("f:")}
    return {k: labels[k] for k in keys if k in labels}


class Labeler:
    def __init__(
        self,
        nodes: NodeApi,
        extra: Extra = no_extra,
        *,
        observe: Callable[[str], None] = lambda outcome: None,
        report: Report = no_report,
        retry_after: float = 5.0,
        idle_wait: float = 1.0,
    ) -> None:
        self.nodes = nodes
        self.extra = extra
        self.observe = observe
        self.report = report
        self.retry_after, self.idle_wait = retry_after, idle_wait
        self._status_labels: dict[str, dict[str, str] | None] = {}  # None: status unreadable
        self._own_domain: dict[str, nvlink.Domain] = {}  # what each status's GPUs say
        self._clique: dict[str, str] = {}  # each Node's nvidia.com/gpu.clique label
        self._said: dict[str, str] = {}  # the last NVLink reason reported per node
        self._statuses_listed = False
        self._node_labels: dict[str, dict[str, str]] | None = None  # None: Nodes not listed yet
        self._pending: dict[str, None] = {}  # ordered set of nodes to converge
        # A relist under way (one watch thread each): what it said so far.
        self._listing_labels: dict[str, dict[str, str] | None] = {}
        self._listing_domains: dict[str, nvlink.Domain] = {}
        self._listing_nodes: dict[str, dict[str, str]] = {}
        self._listing_cliques: dict[str, str] = {}
        self._cond = threading.Condition()

    # -- what the watches tell us (any thread) -------------------------------------------------
    def statuses_listed(self, items: Iterable[Obj]) -> None:
        self.statuses_start()
        self.statuses_page(items)
        self.statuses_done()

    # A status relist arrives page by page (webhook.kube.watch): each page is cut down to the
    # labels and NVLink domain at once, and the whole takes effect when the list is done.
    def statuses_start(self) -> None:
        self._listing_labels, self._listing_domains = {}, {}

    def statuses_page(self, items: Iterable[Obj]) -> None:
        for o in items:
            name, status = _name(o), o.get("status")
            self._listing_labels[name] = _status_labels(name, status)
            if (d := nvlink.status_domain(status)) != nvlink.NONE:
                self._listing_domains[name] = d

    def statuses_done(self) -> None:
        fresh, domains = self._listing_labels, self._listing_domains
        self.statuses_start()
        with self._cond:
            gone = set(self._status_labels) - set(fresh)
            self._status_labels = fresh
            self._own_domain = domains
            self._statuses_listed = True
            self._mark(set(fresh) | gone)

    def status_event(self, kind: str, obj: Obj) -> None:
        name = _name(obj)
        labels = {} if kind == "DELETED" else _status_labels(name, obj.get("status"))
        domain = nvlink.NONE if kind == "DELETED" else nvlink.status_domain(obj.get("status"))
        with self._cond:
            if kind == "DELETED":
                self._status_labels.pop(name, None)
            else:
                self._status_labels[name] = labels
            if domain == nvlink.NONE:
                self._own_domain.pop(name, None)
            else:
                self._own_domain[name] = domain
            self._mark([name])

    def nodes_listed(self, items: Iterable[Obj]) -> None:
        self.nodes_start()
        self.nodes_page(items)
        self.nodes_done()

    def nodes_start(self) -> None:
        self._listing_nodes, self._listing_cliques = {}, {}

    def nodes_page(self, items: Iterable[Obj]) -> None:
        for o in items:
            self._listing_nodes[_name(o)] = _shared(owned_labels(o.get("metadata") or {}))
            if c := _clique(o):
                self._listing_cliques[_name(o)] = c

    def nodes_done(self) -> None:
        fresh, cliques = self._listing_nodes, self._listing_cliques
        self.nodes_start()
        with self._cond:
            self._node_labels = fresh
            self._clique = cliques
            self._mark(n for n, have in fresh.items() if have != self._wanted(n))

    def node_event(self, kind: str, obj: Obj) -> None:
        name = _name(obj)
        with self._cond:
            if self._node_labels is None:
                return  # the list that comes first covers it
            if kind == "DELETED":
                self._node_labels.pop(name, None)
                self._clique.pop(name, None)
                self._said.pop(name, None)
                return
            clique = _clique(obj)
            if clique:
                self._clique[name] = clique
            else:
                self._clique.pop(name, None)
            have = _shared(owned_labels(obj.get("metadata") or {}))
            self._node_labels[name] = have
            if have != self._wanted(name):
                self._mark([name])

    def resync_all(self) -> None:
        """Re-derive every node (e.g. the network topology changed); the leader applies diffs."""
        with self._cond:
            self._mark(set(self._status_labels) | set(self._node_labels or ()))

    # -- the writer (leader only) --------------------------------------------------------------
    def work(self, stop: threading.Event) -> None:
        """The leader-elected worker: converge everything, then whatever is marked, until stop."""
        self.resync_all()
        while not stop.is_set():
            if self.drain(stop):
                stop.wait(self.retry_after)  # an apply failed: back off (a stop ends it at once)
                continue
            with self._cond:
                if not self._pending or not self._listed():
                    # Marks wake us; bounded so a stop is seen within idle_wait (< wind-down).
                    self._cond.wait(self.idle_wait)

    def drain(self, stop: threading.Event | None = None) -> bool:
        """Converge every marked node once. True when an apply failed (it stays marked).
        Nothing happens before both the statuses and the Nodes have been listed: a node whose
        status has not arrived yet would otherwise lose its labels for a moment."""
        failed = False
        while stop is None or not stop.is_set():
            with self._cond:
                if not self._pending or not self._listed():
                    return failed
                name = next(iter(self._pending))
                del self._pending[name]
            try:
                outcome = self.sync(name)
            except NodeGone:  # deleted meanwhile; its watch event forgets it
                outcome = "no-node"
                log.info("node gone before its labels were applied", extra={"node": name})
            except LabelRejected as err:
                outcome = "rejected"
                log.warning("node labels refused", extra={"node": name, "error": str(err)})
            except Exception as err:  # noqa: BLE001 - API server down: keep it marked, retry
                outcome, failed = "failed", True
                log.warning("node label apply failed", extra={"node": name, "error": str(err)})
                with self._cond:
                    self._pending[name] = None
            self.observe(outcome)
            if failed:
                return True
        return failed

    def sync(self, name: str) -> str:
        """Make one node's labels what they should be; returns the outcome."""
        with self._cond:
            want = self._wanted(name)
            have = (self._node_labels or {}).get(name)
            domain = self._domain(name)
        self._say_nvlink(name, domain.reason if have is not None else "")
        if want is None:
            return "skipped"
        if have is None:
            return "no-node"
        if have == want:
            return "unchanged"
        self.nodes.apply_labels(name, want)
        with self._cond:
            if self._node_labels is not None and name in self._node_labels:
                self._node_labels[name] = _shared(dict(want))  # the watch event says the same
        outcome = "applied" if want else "removed"
        log.info("node labels", extra={"node": name, "outcome": outcome})
        return outcome

    def _say_nvlink(self, name: str, reason: str) -> None:
        """A Warning Event when a node's NVLink domain is unknown for a new reason (best effort:
        the labels do not wait on it)."""
        with self._cond:
            if self._said.get(name, "") == reason:
                return
            self._said[name] = reason
        if not reason:
            return
        try:
            self.report(name, NO_NVLINK_DOMAIN, f"no {api.LABEL_NVLINK_DOMAIN} label: {reason}")
        except Exception as err:  # noqa: BLE001 - an Event is best effort
            log.warning("node event failed", extra={"node": name, "error": str(err)})
        log.warning("no NVLink domain", extra={"node": name, "reason": reason})

    # -- helpers (call with the lock held) -----------------------------------------------------
    def _listed(self) -> bool:
        return self._statuses_listed and self._node_labels is not None

    def _wanted(self, name: str) -> dict[str, str] | None:
        base = self._status_labels.get(name, {})
        if base is None:
            return None  # unreadable status: leave the node as it is
        domain = self._domain(name).value
        if domain is not None:
            base = {**base, api.LABEL_NVLINK_DOMAIN: domain}
        source = self.extra
        try:
            more = dict(source(name))
        except Exception as err:  # noqa: BLE001 - a broken extra source must not stop labeling
            log.warning("extra labels failed", extra={"node": name, "error": str(err)})
            more = {}
        return {**base, **more}

    def _domain(self, name: str) -> nvlink.Domain:
        return nvlink.resolve(self._own_domain.get(name, nvlink.NONE), self._clique.get(name))

    def _mark(self, names: Iterable[str]) -> None:
        before = len(self._pending)
        for name in names:
            self._pending[name] = None
        if len(self._pending) != before:
            self._cond.notify_all()


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _clique(obj: Obj) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(api.LABEL_GPU_CLIQUE) or "")


_SETS: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
SETS_KEPT = 4096  # distinct label sets remembered; past this the table starts again


def _shared(labels: dict[str, str]) -> dict[str, str]:
    """The nodes of a pool want, and carry, the same labels: one dict for all of them (at 65,536
    nodes a dict each is ~1 KB a node twice over). Never changed in place, so sharing is safe."""
    if len(_SETS) >= SETS_KEPT:
        _SETS.clear()  # only sharing is lost: dicts already handed out stay valid
    return _SETS.setdefault(tuple(sorted(labels.items())), labels)


def _status_labels(name: str, status: Mapping[str, Any] | None) -> dict[str, str] | None:
    try:
        return _shared(wanted_labels(status))
    except (WireError, ValueError) as err:
        log.warning(
            "unreadable GpuNodeStatus; labels left as they are",
            extra={"node": name, "error": str(err)},
        )
        return None
