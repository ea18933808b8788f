"""The in-memory view the webhook answers from: node records grouped by label set, and GpuClaim
specs. Filled by watches (webhook/kube.py) or by files (mutate/explain), never by a request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from common.labels import labels_for
from common.model import DISTANCE_ORDER, NodeStatus
from common.wire import WireError


@dataclass(frozen=True, slots=True)
class NodeRecord:
    name: str
    labels: tuple[tuple[str, str], ...]  # the gpufabric.io labels the labeler gives this node
    usable_hcas: tuple[str, ...]
    gdr_level: str  # worst GPU -> nearest usable HCA distance on the node ("" if none)

    @property
    def profile(self) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...], str]:
        return (self.labels, self.usable_hcas, self.gdr_level)


@dataclass(frozen=True, slots=True)
class Group:
    """Nodes that look identical to the webhook; placement is decided per group, not per node."""

    labels: Mapping[str, str]
    usable_hcas: tuple[str, ...]
    gdr_level: str
    nodes: tuple[str, ...]


class GroupSet(tuple[Group, ...]):
    """The cache's groups at one moment, with memoized expression results (see placement)."""

    memo: dict[Any, tuple[bool | None, ...]]


def record_from_status(name: str, status: Mapping[str, Any]) -> NodeRecord:
    parsed = NodeStatus.from_dict(status)
    usable = set(parsed.summary.usable_hcas)
    worst = ""
    for gpu in parsed.gpus:
        near = [h.distance for h in gpu.nearest_hcas if h.name in usable]
        if near:
            d = min(near, key=DISTANCE_ORDER.__getitem__)
            if not worst or DISTANCE_ORDER[d] > DISTANCE_ORDER[worst]:
                worst = d
    return NodeRecord(
        name=name,
        labels=tuple(sorted(labels_for(parsed.summary).items())),
        usable_hcas=parsed.summary.usable_hcas,
        gdr_level=worst,
    )


@dataclass
class FabricCache:
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    claims: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    nodes_synced: bool = False
    claims_synced: bool = False
    updated: float = field(default_factory=time.monotonic)
    _groups: dict[Any, set[str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _snapshot: GroupSet | None = None
    rejected: dict[str, str] = field(default_factory=dict)  # node -> why its status was unusable
    # Statuses whose Node is known to be gone: kept (the Node may come back) but never counted.
    absent: dict[str, NodeRecord] = field(default_factory=dict)
    _existing: set[str] | None = None  # None until the Node list arrives: every status counts
    _gone: set[str] = field(default_factory=set)  # Nodes deleted before the first Node list

    @property
    def synced(self) -> bool:
        return self.nodes_synced and self.claims_synced

    def groups(self) -> GroupSet:
        snap = self._snapshot
        if snap is None:
            with self._lock:
                snap = GroupSet(
                    Group(dict(key[0]), key[1], key[2], tuple(sorted(names)))
                    for key, names in sorted(self._groups.items(), key=lambda kv: str(kv[0]))
                    if names
                )
                snap.memo = {}
                self._snapshot = snap
        return snap

    def _touch(self) -> None:
        self._snapshot = None
        self.updated = time.monotonic()

    def _counts(self, name: str) -> bool:
        if self._existing is None:
            return name not in self._gone
        return name in self._existing

    def _place(self, name: str, record: NodeRecord | None) -> None:
        """Set (or drop, for None) a node's record, counting it only if its Node exists."""
        old = self.nodes.pop(name, None)
        if old is not None:
            self._groups.get(old.profile, set()).discard(name)
        self.absent.pop(name, None)
        if record is None:
            return
        if self._counts(name):
            self.nodes[name] = record
            self._groups.setdefault(record.profile, set()).add(name)
        else:
            self.absent[name] = record

    def put_node(self, name: str, status: Mapping[str, Any] | None) -> None:
        try:
            record = record_from_status(name, status or {})
        except (WireError, ValueError) as err:
            self.rejected[name] = str(err)
            self.delete_node(name)
            return
        self.rejected.pop(name, None)
        with self._lock:
            self._place(name, record)
            self._touch()

    def delete_node(self, name: str) -> None:
        with self._lock:
            self._place(name, None)
            self._touch()

    def replace_existing_nodes(self, names: Iterable[str]) -> None:
        """The full set of Nodes that exist (a Node relist): only their statuses count from now."""
        with self._lock:
            self._existing = set(names)
            self._gone.clear()
            for name, record in [*self.nodes.items(), *self.absent.items()]:
                self._place(name, record)
            self._touch()

    def node_exists(self, name: str, exists: bool) -> None:
        """One Node appeared (exists=True) or was deleted (False)."""
        with self._lock:
            if self._existing is None:  # no Node list yet: remember only the deletions
                if exists:
                    self._gone.discard(name)
                else:
                    self._gone.add(name)
            elif exists:
                self._existing.add(name)
            else:
                self._existing.discard(name)
            record = self.nodes.get(name) or self.absent.get(name)
            if record is not None:
                self._place(name, record)
            self._touch()

    def replace_nodes(self, statuses: Iterable[tuple[str, Mapping[str, Any] | None]]) -> None:
        with self._lock:
            self.nodes.clear()
            self.absent.clear()
            self._groups.clear()
            self._touch()
        for name, status in statuses:
            self.put_node(name, status)
        self.nodes_synced = True

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
