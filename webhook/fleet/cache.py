"""The in-memory view the webhook answers from: each node's layout (counted in a Fleet only while
its Node exists) and GpuClaim specs. Filled by watches (webhook/kube/client.py) or by files
(mutate/explain), never by a request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from common.wire import WireError
from webhook.fleet.ingest import layout_of
from webhook.fleet.layouts import Fleet, Group, Layout
from webhook.fleet.selection import LabelStore, Own, Selections

__all__ = ["FabricCache", "Group", "NodeRecord", "record_from_status"]

# A relist runs in a watch thread beside the event loop that answers reviews. The GIL would let
# the loop in only every 5 ms (the switch interval), several times per review; a short real sleep
# every few statuses (well under a millisecond of work) hands it over at once instead.
_YIELD_EVERY = 16
_YIELD_SECONDS = 0.0001


@dataclass(frozen=True, slots=True)
class NodeRecord:
    name: str
    layout: Layout

    @property
    def labels(self) -> tuple[tuple[str, str], ...]:
        """The gpufabric.io labels the labeler gives this node."""
        return tuple(sorted(self.layout.labels.items()))

    @property
    def usable_hcas(self) -> tuple[str, ...]:
        return self.layout.usable_hcas

    @property
    def gdr_level(self) -> str:
        return self.layout.gdr_level


def record_from_status(name: str, status: Mapping[str, Any]) -> NodeRecord:
    return NodeRecord(name, layout_of(status))


@dataclass
class FabricCache:
    nodes: dict[str, NodeRecord] = field(default_factory=dict)  # statuses of existing Nodes
    claims: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    nodes_synced: bool = False
    claims_synced: bool = False
    updated: float = field(default_factory=time.monotonic)
    rejected: dict[str, str] = field(default_factory=dict)  # node -> why its status was unusable
    # Statuses whose Node is known to be gone: kept (the Node may come back) but never counted.
    absent: dict[str, NodeRecord] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _fleet: Fleet = field(init=False)
    _existing: set[str] | None = None  # None until the Node list arrives: every status counts
    _gone: set[str] = field(default_factory=set)  # Nodes deleted before the first Node list
    # Node labels, once known (the Node watch, or Node objects given offline): a pod's own
    # nodeSelector and affinity then narrow the nodes it is decided on (webhook.fleet.selection).
    _labels: LabelStore | None = None
    _selections: Selections = field(init=False)
    _listing: set[str] = field(default_factory=set)  # names of the status relist under way
    _existing_listing: set[str] = field(default_factory=set)  # and of the Node relist

    def __post_init__(self) -> None:
        self._fleet = Fleet(self._lock)
        self._selections = Selections(self._lock)

    @property
    def synced(self) -> bool:
        return self.nodes_synced and self.claims_synced

    def groups(self) -> Fleet:
        """The live fleet placement asks (see webhook.fleet.layouts)."""
        return self._fleet

    def fleet_for(self, pod: Mapping[str, Any]) -> Fleet:
        """The fleet of the nodes the pod's own nodeSelector and required affinity admit, when
        they name labels of the Node and those are known; else the whole fleet."""
        return self.scope_for(pod)[0]

    def scope_for(self, pod: Mapping[str, Any]) -> tuple[Fleet, Own | None]:
        """fleet_for, and the Own of the pod's constraints where finding the fleet read them
        (webhook.fleet.selection; None: not read, the Node labels are not known)."""
        labels = self._labels
        if labels is None:
            return self._fleet, None
        return self._selections.scope_for(pod, self._fleet, labels)

    def _counts(self, name: str) -> bool:
        if self._existing is None:
            return name not in self._gone
        return name in self._existing

    def _place(self, name: str, record: NodeRecord | None) -> None:
        """Set (or drop, for None) a node's record, counting it only if its Node exists.
        Callers hold the lock."""
        fleet = self._fleet
        old = self.nodes.pop(name, None)
        if old is not None:
            fleet.remove(name, old.layout)
        self.absent.pop(name, None)
        new = None
        if record is not None:
            if self._counts(name):
                record = NodeRecord(name, fleet.add(name, record.layout))
                self.nodes[name] = record
                new = record.layout
            else:
                self.absent[name] = record
        if len(self._selections) and (old is not None or new is not None):
            labels = self._labels.get(name) if self._labels is not None else None
            self._selections.update(name, old.layout if old else None, new, labels)

    def _relabel(self, name: str, labels: Mapping[str, Any] | None) -> bool:
        """Record a Node's labels (callers hold the lock); whether they changed."""
        if self._labels is None:
            self._labels = LabelStore()
        return self._labels.put(name, labels)

    def set_node_labels(self, name: str, labels: Mapping[str, Any] | None) -> None:
        """A Node's labels (offline: a Node object given in --status), not its existence."""
        with self._lock:
            if self._relabel(name, labels):
                self._replace(name)

    def _replace(self, name: str) -> None:
        record = self.nodes.get(name) or self.absent.get(name)
        if record is not None:
            self._place(name, record)

    def put_node(self, name: str, status: Mapping[str, Any] | None) -> None:
        try:
            record = record_from_status(name, status or {})
        except (WireError, ValueError) as err:
            self.rejected[name] = str(err)
            self.delete_node(name)
            return
        self.rejected.pop(name, None)
        with self._lock:
            if self.nodes.get(name) != record or name in self.absent:
                self._place(name, record)
            self.updated = time.monotonic()

    def delete_node(self, name: str) -> None:
        with self._lock:
            self._place(name, None)
            self.updated = time.monotonic()

    def replace_nodes(self, statuses: Iterable[tuple[str, Mapping[str, Any] | None]]) -> None:
        """A whole relist at once (files, tests): `start_nodes`, one page, `end_nodes`."""
        self.start_nodes()
        self.page_nodes(statuses)
        self.end_nodes()

    def start_nodes(self) -> None:
        """A status relist begins; its pages follow (again from here after an expired continue)."""
        self._listing = set()

    def page_nodes(self, statuses: Iterable[tuple[str, Mapping[str, Any] | None]]) -> None:
        """One page of a relist, applied as the difference, so reviews meanwhile see either the
        old or the new status of each node (never an emptied cache) and unchanged nodes cost no
        update. Only the names of the relist are kept until it ends, never the statuses."""
        seen = self._listing
        for i, (name, status) in enumerate(statuses):
            seen.add(name)
            self.put_node(name, status)
            if i % _YIELD_EVERY == _YIELD_EVERY - 1:
                time.sleep(_YIELD_SECONDS)

    def end_nodes(self) -> None:
        """The relist is complete: the statuses it did not name are gone."""
        seen, self._listing = self._listing, set()
        with self._lock:
            for name in [n for n in (*self.nodes, *self.absent) if n not in seen]:
                self._place(name, None)
            self.updated = time.monotonic()
        for name in [n for n in self.rejected if n not in seen]:
            del self.rejected[name]
        self.nodes_synced = True

    def replace_existing_nodes(
        self, names: Iterable[str], labels: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        """The full set of Nodes that exist (a Node relist): only their statuses count from now.
        `labels`: every Node's labels, when the caller has them."""
        names = list(names)
        self.start_existing()
        if labels is not None:
            with self._lock:  # the caller knows Node labels (some may be unknown): keep a store
                if self._labels is None:
                    self._labels = LabelStore()
        self.page_existing([(n, labels.get(n) if labels is not None else None) for n in names])
        self.end_existing(with_labels=labels is not None)

    def start_existing(self) -> None:
        """A Node relist begins; its pages of (name, labels) follow."""
        self._existing_listing = set()

    def page_existing(self, nodes: Iterable[tuple[str, Mapping[str, Any] | None]]) -> None:
        """One page of the Node relist: (name, labels or None when the caller has none). Each
        listed Node counts at once; its labels are recorded as they come."""
        with self._lock:
            for name, labels in nodes:
                self._existing_listing.add(name)
                was = self._counts(name)
                if self._existing is not None:
                    self._existing.add(name)
                self._gone.discard(name)
                changed = labels is not None and self._relabel(name, labels)
                if was != self._counts(name) or changed:
                    self._replace(name)
            self.updated = time.monotonic()

    def end_existing(self, with_labels: bool = True) -> None:
        """The Node relist is complete: only the Nodes it named exist (and keep labels)."""
        listed, self._existing_listing = self._existing_listing, set()
        with self._lock:
            self._existing = listed
            self._gone.clear()
            if with_labels and self._labels is not None:
                for name in self._labels.names() - listed:
                    self._relabel(name, None)
            for name, record in [*self.nodes.items(), *self.absent.items()]:
                if self._counts(name) != (name in self.nodes):
                    self._place(name, record)
            self.updated = time.monotonic()

    def node_exists(self, name: str, exists: bool, labels: Mapping[str, Any] | None = None) -> None:
        """One Node appeared or changed (exists=True, with its labels when known) or was
        deleted (False)."""
        with self._lock:
            was = self._counts(name)
            if self._existing is None:  # no Node list yet: remember only the deletions
                if exists:
                    self._gone.discard(name)
                else:
                    self._gone.add(name)
            elif exists:
                self._existing.add(name)
            else:
                self._existing.discard(name)
            changed = False
            if not exists and self._labels is not None:
                changed = self._labels.put(name, None)
            elif exists and labels is not None:
                changed = self._relabel(name, labels)
            if was != self._counts(name) or changed:
                self._replace(name)
            self.updated = time.monotonic()

    def put_claim(self, namespace: str, name: str, spec: Mapping[str, Any]) -> None:
        self.claims[(namespace, name)] = spec
        self.updated = time.monotonic()

    def delete_claim(self, namespace: str, name: str) -> None:
        self.claims.pop((namespace, name), None)
        self.updated = time.monotonic()

    def replace_claims(self, claims: Iterable[tuple[str, str, Mapping[str, Any]]]) -> None:
        self.claims = {(ns, n): spec for ns, n, spec in claims}
        self.claims_synced = True
        self.updated = time.monotonic()

    def claim(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.claims.get((namespace, name))
