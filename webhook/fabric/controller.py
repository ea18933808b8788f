"""The fabric in the cluster: inputs from watches, re-derived off the watch threads, published.

Watches (any thread) hand in the topology ConfigMaps (`gpufabric-topology` and the parts
labelled `gpufabric.io/topology-part`, from two watches; sources/parts.py), each node's HCA
GUIDs and, with `--topology-labels`, the node labels that preset reads. `refresh()` re-derives when
something that matters changed: a status event that leaves a node's compute GUIDs as they were
costs nothing, and one that changes them places the dump as parsed before (kept while its parts
stay the same) without reading it again.
Bad input keeps the last good positions (never wipe the fleet's labels because of one bad edit);
the GpuFabric condition says what is wrong. No ConfigMap and no preset: no network labels.
The NVLink domains of the nodes (their statuses' GPUs, else their `nvidia.com/gpu.clique`) are shown
in the GpuFabric status under the leaf domains that hold them; a change there re-renders the status
without deriving the network again.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from common import api, nvlink
from webhook.fabric import render
from webhook.fabric.levels import Positions
from webhook.fabric.model import Fabric, SourceError
from webhook.fabric.nvdomains import nvlink_view
from webhook.fabric.sources import join, parts
from webhook.fabric.sources.formats import parse, place
from webhook.fabric.sources.ib.dump import Dump
from webhook.fabric.sources.inbox import Inbox
from webhook.fabric.sources.nodelabels import from_labels, levels_for

log = logging.getLogger(__name__)

CONFIGMAP = parts.CONFIGMAP
KIND = "GpuFabric"
PLURAL = "gpufabrics"
OBJECT_NAME = "cluster"
CONDITION = "SourceValid"
_TOPOGRAPH_PREFIXES = ("fabric.topograph.run/", "network.topology.nvidia.com/")


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def transition(
    kind: str, new: Mapping[str, str], old: Mapping[str, str], now: Callable[[], str]
) -> dict[str, str]:
    """Condition `kind` with `new`'s status/reason/message; lastTransitionTime moves only when
    the status does."""
    since = old.get("lastTransitionTime") if old.get("status") == new["status"] else None
    return {"type": kind, **new, "lastTransitionTime": since or now()}


class FabricController:
    def __init__(
        self,
        topology_labels: str | None = None,
        now: Callable[[], str] = _now,
        on_fallback: Callable[[str], None] | None = None,
    ) -> None:
        """`on_fallback(why)`: a dump was read line by line, not column-wise (reader.parse)."""
        self.preset = topology_labels
        self._now = now
        self._on_fallback = on_fallback
        self._lock = threading.Lock()
        self._parts = Inbox()  # the topology ConfigMaps, kept as the API gives them (compressed)
        # Packed 8 bytes a GUID, not frozensets: far less memory at 65,536 nodes (a set only
        # while the fabric is derived).
        self._guids: dict[str, bytes] = {}
        self._node_labels: dict[str, dict[str, str]] = {}
        self._own_domain: dict[str, nvlink.Domain] = {}  # what each status's GPUs say
        self._clique: dict[str, str] = {}  # each Node's nvidia.com/gpu.clique
        self._good: Fabric | None = None  # the last fabric derived without error
        # The source as last parsed, by the digest of its parts: a change of GUIDs alone places
        # it again without reading the dump again (refresh's thread only).
        self._parsed: tuple[str, Dump | Fabric] | None = None
        self._dirty = True
        self._nvlink_dirty = False
        self._values: dict[str, str] | None = None  # nvlink_domains(), until an input changes
        self._positions = Positions(Fabric("none"))
        self._status: dict[str, Any] = {}
        self._condition: dict[str, str] = {}
        self._others: dict[str, dict[str, str]] = {}  # other flows' conditions, by type
        self._republish = False
        self._keys = self._relevant_keys()
        self.statuses_start()

    # -- inputs (any thread) ---------------------------------------------------------------
    def configmap(self, data: Mapping[str, str] | None) -> None:
        """ConfigMap gpufabric-topology's data alone (None: it does not exist)."""
        items = [] if data is None else [{"metadata": {"name": CONFIGMAP}, "data": data}]
        self.configmaps("named", items)

    def configmaps(self, watch: str, items: Sequence[Mapping[str, Any]]) -> None:
        """What the topology watch `watch` listed."""
        found = [(parts.name_of(o), parts.part_of(o)) for o in items]
        with self._lock:
            if self._parts.listed(watch, found):
                self._dirty = True

    def configmap_event(self, watch: str, kind: str, obj: Mapping[str, Any]) -> None:
        """One event of the topology watch `watch`."""
        part = None if kind == "DELETED" else parts.part_of(obj)
        with self._lock:
            if self._parts.event(watch, parts.name_of(obj), part):
                self._dirty = True

    def status(self, name: str, status: Mapping[str, Any] | None) -> None:
        """A GpuNodeStatus (None: deleted). Only its compute-fabric GUIDs matter here."""
        guids = None if status is None else _packed(join.status_guids(status))
        own = nvlink.status_domain(status)
        with self._lock:
            if self._own_domain.get(name, nvlink.NONE) != own:
                if own == nvlink.NONE:
                    self._own_domain.pop(name, None)
                else:
                    self._own_domain[name] = own
                self._nvlink_dirty, self._values = True, None
            if self._guids.get(name) == guids:
                return
            if guids is None:
                self._guids.pop(name, None)
            else:
                self._guids[name] = guids
            self._dirty = self._dirty or self._uses_guids()

    def statuses(self, items: list[tuple[str, Mapping[str, Any] | None]]) -> None:
        self.statuses_start()
        self.statuses_page(items)
        self.statuses_done()

    # A relist page by page (webhook.kube.watch): each status cut down to its GUIDs and NVLink
    # domain as it comes; the whole takes effect when the list is done.
    def statuses_start(self) -> None:
        self._listing: tuple[dict[str, bytes], dict[str, nvlink.Domain]] = ({}, {})

    def statuses_page(self, items: list[tuple[str, Mapping[str, Any] | None]]) -> None:
        fresh, own = self._listing
        for name, st in items:
            fresh[name] = _packed(join.status_guids(st))
            if (d := nvlink.status_domain(st)) != nvlink.NONE:
                own[name] = d

    def statuses_done(self) -> None:
        fresh, own = self._listing
        self.statuses_start()
        with self._lock:
            if own != self._own_domain:
                self._own_domain, self._nvlink_dirty, self._values = own, True, None
            if fresh != self._guids:
                self._guids = fresh
                self._dirty = self._dirty or self._uses_guids()

    def node(self, name: str, labels: Mapping[str, str] | None) -> None:
        """A Node's labels (None: deleted); only the keys the preset reads are kept, and the
        clique label."""
        clique = (labels or {}).get(api.LABEL_GPU_CLIQUE) or ""
        with self._lock:
            if self._clique.get(name, "") != clique:
                if clique:
                    self._clique[name] = clique
                else:
                    self._clique.pop(name, None)
                self._nvlink_dirty, self._values = True, None
        if self.preset is None:
            return
        kept = None if labels is None else {k: v for k, v in labels.items() if self._wants(k)}
        with self._lock:
            if self._node_labels.get(name) == kept:
                return
            if kept is None:
                self._node_labels.pop(name, None)
            else:
                self._node_labels[name] = kept
            self._dirty = True

    # -- outputs ---------------------------------------------------------------------------
    def labels_for_node(self, name: str) -> Mapping[str, str]:
        with self._lock:
            positions = self._positions
        return positions.labels_for_node(name)

    def refresh(self) -> tuple[bool, dict[str, Any] | None]:
        """Re-derive if an input changed: (labels changed, new GpuFabric body or None)."""
        with self._lock:
            if not self._dirty and not self._nvlink_dirty:
                if not self._republish:
                    return False, None
                self._republish = False
                return False, self.body()
            again, self._dirty, self._nvlink_dirty = self._dirty, False, False
            self._republish = False
            # Copies of the inputs only when the fabric is derived again (not for an NVLink-only
            # change); the GUIDs are unpacked after the lock is let go.
            found = self._parts.parts() if again else []
            packed = dict(self._guids) if again else {}
            node_labels = dict(self._node_labels) if again else {}
            domains = self._domains()
        fabric, error, configured = (None, "", False)
        if again:
            guids = {n: _unpacked(g) for n, g in packed.items()}
            fabric, error, configured = self._derive(found, guids, node_labels)
        with self._lock:
            old = self._positions
            if fabric is not None:
                self._positions, self._good = Positions(fabric), fabric
            if self._good is not None:
                view = nvlink_view(domains, self._positions)
                self._status = render.status(self._good, self._positions, view)
            changed = dict(old.placed) != dict(self._positions.placed)
            if again:
                self._set_condition(error, configured or self.preset is not None)
            body = self.body()
        if error:
            log.warning("topology source rejected; labels kept", extra={"error": error})
        return changed, body

    def nvlink_domains(self) -> dict[str, str]:
        """node -> its NVLink domain label value, for nodes that have one (the exports' NVLink
        level reads this; the labeler derives the same value for the node label)."""
        with self._lock:
            if self._values is None:
                found = self._domains().items()
                self._values = {n: d.value for n, d in found if d.value is not None}
            return self._values

    def _domains(self) -> dict[str, nvlink.Domain]:
        """Each node's NVLink domain, or why none (call with the lock held)."""
        names = set(self._own_domain) | set(self._clique)
        return {
            n: nvlink.resolve(self._own_domain.get(n, nvlink.NONE), self._clique.get(n))
            for n in names
        }

    def body(self) -> dict[str, Any]:
        """The GpuFabric object (cluster-scoped, named `cluster`) for server-side apply."""
        return {
            "apiVersion": api.API_VERSION,
            "kind": KIND,
            "metadata": {"name": OBJECT_NAME},
            "status": {
                **self._status,
                "conditions": [dict(self._condition)]
                + [dict(self._others[k]) for k in sorted(self._others)],
            },
        }

    def positions(self) -> Positions:
        """The positions the labels come from now (the last good ones after a bad edit)."""
        with self._lock:
            return self._positions

    def set_condition(self, kind: str, new: Mapping[str, str]) -> None:
        """Another flow's condition on GpuFabric `cluster` (the exports' `Exported`): published
        with the next refresh when it changed."""
        with self._lock:
            old = self._others.get(kind, {})
            cond = transition(kind, new, old, self._now)
            if cond != old:
                self._others[kind] = cond
                self._republish = True

    # -- helpers ---------------------------------------------------------------------------
    def _derive(
        self,
        found: list[parts.Part],
        guids: dict[str, frozenset[int]],
        node_labels: dict[str, dict[str, str]],
    ) -> tuple[Fabric | None, str, bool]:
        """(the fabric or None, why not, whether a ConfigMap source is there). The source's text
        lives only while it is parsed: between derivations the parts are kept (compressed, as the
        API gives them) and what they parse to, for as long as they stay the same."""
        try:
            source = parts.assemble(found)
        except parts.PartError as err:
            self._parsed = None
            return None, str(err), True
        if source is None:
            self._parsed = None
        try:
            if source is not None:
                return place(self._parse(source), guids), "", True
            if self.preset is not None:
                return from_labels(self.preset, node_labels), "", False
        except parts.PartError as err:
            return None, str(err), True
        except SourceError as err:
            where = source.where if source is not None else "--topology-labels"
            return None, f"{where}: {err}", source is not None
        return Fabric("none"), "", False

    def _parse(self, source: parts.Source) -> Dump | Fabric:
        """The source parsed: again only when its parts' content changed."""
        digest = parts.digest(source)
        if self._parsed is not None and self._parsed[0] == digest:
            return self._parsed[1]
        self._parsed = None  # the old one goes before the new one is read

        def fell_back(why: str) -> None:  # once per source content: it is parsed once
            log.info("ibnetdiscover dump read line by line", extra={"reason": why})
            if self._on_fallback is not None:
                self._on_fallback(why)

        parsed = parse(parts.text_chunks(source), source.key, fell_back)
        self._parsed = (digest, parsed)
        return parsed

    def _set_condition(self, error: str, configured: bool) -> None:
        if error:
            new = {"status": "False", "reason": "BadInput", "message": error}
        elif not configured:
            new = {
                "status": "Unknown",
                "reason": "NoSource",
                "message": f"no ConfigMap {CONFIGMAP} and no --topology-labels: no network labels",
            }
        else:
            new = {"status": "True", "reason": "Derived", "message": "positions derived"}
        self._condition = transition(CONDITION, new, self._condition, self._now)

    def _uses_guids(self) -> bool:
        return "ibnetdiscover" in self._parts.topology_keys()

    def _relevant_keys(self) -> frozenset[str]:
        if self.preset is None or self.preset == "topograph":
            return frozenset()
        try:
            return frozenset(k for level in levels_for(self.preset, {}) for k in level)
        except SourceError:
            return frozenset()  # refresh() reports the bad preset in the condition

    def _wants(self, key: str) -> bool:
        if self.preset == "topograph":
            return key.startswith(_TOPOGRAPH_PREFIXES)
        return key in self._keys


def run(
    controller: FabricController,
    stop: threading.Event,
    resync: Callable[[], None],
    publish: Callable[[dict[str, Any]], None],
    period: float = 1.0,
) -> None:
    """The leader's loop: re-derive at most once a `period`, relabel on change, publish on change
    (a failed publish is retried next round)."""
    published: dict[str, Any] | None = None
    pending: dict[str, Any] | None = None
    failures, wait = 0, 0  # publish backoff in rounds (CRD missing, API server down)
    while not stop.is_set():
        changed, body = controller.refresh()
        if changed:
            resync()
        if body is not None and body != published:
            pending = body
        if pending is not None and wait <= 0:
            try:
                publish(pending)
                published, pending, failures = pending, None, 0
            except Exception as err:  # noqa: BLE001 - try again later; labels do not wait on it
                failures += 1
                wait = min(60, 2**failures)
                log.warning("GpuFabric publish failed", extra={"error": str(err), "retry_s": wait})
        wait -= 1
        stop.wait(period)


def _packed(guids: frozenset[int]) -> bytes:
    """8 bytes a GUID (parse_guid keeps them to 64 bits): a tuple of ints is ~4x that, and the
    leader keeps them for every node."""
    return b"".join(g.to_bytes(8, "big") for g in sorted(guids))


def _unpacked(packed: bytes) -> frozenset[int]:
    return frozenset(int.from_bytes(packed[i : i + 8], "big") for i in range(0, len(packed), 8))
