"""The placer's capacity view: which GPUs are free on which node, and which domain a node is in.

Kept current incrementally from Node and Pod events (placer.py). A node counts only while it is
Ready, schedulable and not fabric-degraded; its taints are checked per pod (selector.py). Used GPUs
are the requests of every non-terminal pod bound to the node, plus the GPUs promised to group
members that the placer ungated but the scheduler has not bound yet, so that two groups are
never promised the same free GPUs, plus the GPUs of pending pods the scheduler nominated to a node
(status.nominatedNodeName: it keeps their room there).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from webhook.groups.decision.fabricorder import LEAF as LEAF
from webhook.groups.decision.fabricorder import FabricOrder, Index, Where
from webhook.groups.decision.fabricorder import fabric_order as fabric_order
from webhook.groups.decision.ranks import lowest
from webhook.groups.decision.tally import Tally
from webhook.groups.model.names import LEVELS, Level, level_key
from webhook.groups.model.objects import NodeInfo, node_info
from webhook.groups.model.objects import pod_gpus as pod_gpus  # re-exported for webhook/admission
from webhook.groups.model.selector import Facts, Selector, admitting

_MEMO_LIMIT = 512  # distinct pod shapes whose eligible nodes are kept
_TALLY_LIMIT = 8  # distinct constraint sets (other than "every usable node") tallied per domain


def _where(labels: Mapping[str, str]) -> tuple[str | None, ...]:
    return tuple(labels.get(level_key(level)) or None for level in LEVELS)


@dataclass(slots=True)
class _Tracked:
    """A tally over the nodes some selectors admit, with those nodes (to keep it current)."""

    selectors: tuple[Selector, ...]
    nodes: set[str]
    tally: Tally


class CapacityView:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeInfo] = {}
        self._listing: dict[str, NodeInfo] = {}  # a node list in flight (start_nodes)
        self.bound: dict[str, tuple[str, int]] = {}  # pod uid -> (node, GPUs)
        self.promised: dict[str, tuple[str, int]] = {}  # pod uid -> (node, GPUs)
        # pod uid -> (node, GPUs) of pending pods kube-scheduler nominated (nominatedNodeName): it
        # keeps their room there, so the placer does too; a nomination counts instead of the
        # placer's own promise for the same pod (one pod, one place)
        self.nominated: dict[str, tuple[str, int]] = {}
        self._taken: dict[str, int] = {}  # node -> GPUs bound or promised
        self._with_free: dict[str, int] = {}  # usable nodes with a free GPU -> free (as tallied)
        self._usable = 0  # usable nodes
        self._all = Tally()  # every usable node, per domain
        self._tallies: dict[frozenset[str], _Tracked] = {}  # by the signatures they admit for
        self._fabric = FabricOrder()
        self._where = self._fabric.where  # node -> its domain per level
        self.memo: dict[object, object] = {}  # per node generation, for choose.py
        self._eligible: dict[str, tuple[Selector, set[str]]] = {}  # kept current per node
        self._frozen: dict[str, frozenset[str]] = {}  # eligible() copies until a node changes
        self.generation = 0  # bumps whenever a node changes in a way placement reads
        # node -> labels it is about to carry that its object does not show yet (overlay)
        self._overlay: dict[str, dict[str, str]] = {}
        # node -> its free GPUs at mark(), for each node whose free GPUs moved since (None: no mark)
        self._marked: dict[str, int] | None = None

    # -- nodes -------------------------------------------------------------------------------
    def put_node(self, obj: Mapping[str, Any]) -> None:
        info = node_info(obj)
        if self.nodes.get(info.name) != info:
            self._node_out(info.name)
            self.nodes[info.name] = info
            self._fabric.put(info.name, _where(info.labels))
            self._node_in(info.name)
            self._changed()

    def delete_node(self, name: str) -> None:
        if name in self.nodes:
            self._node_out(name)
            del self.nodes[name]
            self._fabric.put(name, None)
            self._node_in(name)  # only drops it from the eligible sets
            self._changed()

    def replace_nodes(self, objs: Iterable[Mapping[str, Any]]) -> None:
        self.start_nodes()
        self.page_nodes(objs)
        self.end_nodes()

    def start_nodes(self) -> None:
        """A node list begins (again): the view stays as it was until end_nodes, so a decision
        between pages never sees half a list; only each node's NodeInfo is kept meanwhile."""
        self._listing = {}

    def page_nodes(self, objs: Iterable[Mapping[str, Any]]) -> None:
        for info in map(node_info, objs):
            old = self.nodes.get(info.name)
            self._listing[info.name] = old if old == info else info  # a relist shares the old

    def end_nodes(self) -> None:
        """The list is complete: the view holds exactly the nodes listed since start_nodes."""
        self.nodes, self._listing = self._listing, {}
        shared: dict[Where, Where] = {}  # nodes of a leaf without NVLink domain share one
        where = {n: shared.setdefault(w := _where(i.labels), w) for n, i in self.nodes.items()}
        self._fabric = FabricOrder(where)
        self._where = self._fabric.where
        self._eligible, self._tallies = {}, {}
        self._recount()
        self._changed()

    def overlay(self, node: str, labels: Mapping[str, str]) -> None:
        """Labels the node is about to carry that its object does not show yet; selectors read
        them as the node's (the object's own win where both have a key). The placer plays with
        them the IMEX channel label NVIDIA's driver writes only once a pod is prepared there
        (imex/channels.py), so two groups are never sent to one channel before it comes."""
        if self._overlay.get(node, {}) == labels:
            return
        self._node_out(node)
        if labels:
            self._overlay[node] = dict(labels)
        else:
            self._overlay.pop(node, None)
        self._node_in(node)
        self._changed()

    def _facts(self, info: NodeInfo) -> Facts:
        """What Selector.admits reads of a node: its labels with the overlay under them."""
        extra = self._overlay.get(info.name)
        return info.name, info.labels if extra is None else {**extra, **info.labels}, info.taints

    def _changed(self) -> None:
        self.memo = {}
        self._frozen = {}
        self.generation += 1

    def _recount(self) -> None:
        """Every tally from scratch (after a relist; events then keep them current). Which nodes
        each tracked tally covers depends on the nodes only, so a pod relist keeps it."""
        self._all, self._with_free, self._usable = Tally(), {}, 0
        for name, info in self.nodes.items():
            if info.usable:
                free = self.free(name)
                if free > 0:
                    self._with_free[name] = free
                self._usable += 1
                self._all.add(self._where[name], free, info.gpus)
        for tracked in self._tallies.values():
            tracked.tally = Tally()
            for name in tracked.nodes:
                free = self._with_free.get(name, 0)
                tracked.tally.add(self._where[name], free, self.nodes[name].gpus)

    def _node_out(self, name: str) -> None:
        """Take a node's GPUs out of every tally (before it changes)."""
        info = self.nodes.get(name)
        if info is None or not info.usable:
            return
        where, free = self._where[name], self._with_free.pop(name, 0)
        self._usable -= 1
        self._all.add(where, free, info.gpus, -1)
        for tracked in self._tallies.values():
            if name in tracked.nodes:
                tracked.nodes.discard(name)
                tracked.tally.add(where, free, info.gpus, -1)

    def _node_in(self, name: str) -> None:
        """Count a node (as it is now) into every tally, and into the eligible sets."""
        info = self.nodes.get(name)
        for selector, nodes in self._eligible.values():
            nodes.discard(name)
            if info is not None and info.usable and selector.admits(*self._facts(info)):
                nodes.add(name)
        if info is None or not info.usable:
            return
        where, free = self._where[name], self.free(name)
        if free > 0:
            self._with_free[name] = free
        self._usable += 1
        self._all.add(where, free, info.gpus)
        for tracked in self._tallies.values():
            if any(s.admits(*self._facts(info)) for s in tracked.selectors):
                tracked.nodes.add(name)
                tracked.tally.add(where, free, info.gpus)

    # -- pods --------------------------------------------------------------------------------
    def _add(self, node: str, gpus: int) -> None:
        self._taken[node] = self._taken.get(node, 0) + gpus
        self._recheck(node)

    def _recheck(self, node: str) -> None:
        """Move the node's free GPUs in the tallies to what its pods leave now."""
        info = self.nodes.get(node)
        if info is None or not info.usable:
            return
        was, now = self._with_free.get(node, 0), self.free(node)
        if was == now:
            return
        if self._marked is not None:
            self._marked.setdefault(node, was)
        if now > 0:
            self._with_free[node] = now
        else:
            self._with_free.pop(node, None)
        where = self._where[node]
        self._all.move(where, was, now)
        for tracked in self._tallies.values():
            if node in tracked.nodes:
                tracked.tally.move(where, was, now)

    def _sub(self, entry: tuple[str, int] | None) -> None:
        if entry is not None:
            self._taken[entry[0]] = self._taken.get(entry[0], 0) - entry[1]
            self._recheck(entry[0])

    def put_pod(self, uid: str, node: str, gpus: int, active: bool, nominated: str = "") -> None:
        """A pod's binding as the API reports it; a bound pod settles its promise. `nominated`:
        a pending pod's status.nominatedNodeName."""
        kept = self.nominated.get(uid) or self.promised.get(uid) if node else None
        if node:
            self.release(uid)
        self._sub(self.bound.pop(uid, None))
        if node and active and gpus:
            self.bound[uid] = (node, gpus)
            self._add(node, gpus)
        self._nominate(uid, (nominated, gpus) if nominated and not node else None)
        if kept is not None and kept[0] != node:
            self._swap(node, kept[0])

    def _swap(self, full: str, left: str) -> None:
        """A pod was bound elsewhere than where its room was kept (any node of its domain is
        the scheduler's to choose), maybe on a node promised to another member of that domain:
        such promises move to the node it left. A node's free GPUs never go below 0, so an
        overfull node would otherwise hide a pod and the domain count one node free too many."""
        info = self.nodes.get(full)
        if info is None or self._where.get(full) != self._where.get(left):
            return
        for uid, (at, gpus) in list(self.promised.items()):
            if self._taken.get(full, 0) <= info.gpus:
                return
            if at == full and uid not in self.nominated and self.free(left) >= gpus:
                self.promise(uid, left, gpus)

    def _nominate(self, uid: str, now: tuple[str, int] | None) -> None:
        was = self.nominated.get(uid)
        if was == now or (was is None and now is not None and not now[1]):
            return
        promise = self.promised.get(uid)
        counted = was or promise  # where the pod's room was counted, and is now
        if was is not None:
            self._sub(self.nominated.pop(uid))
            if now is None and promise is not None:
                self._add(*promise)  # the placer's promise counts again
        if now is not None and now[1]:
            if was is None:
                self._sub(promise)
            self.nominated[uid] = now
            self._add(*now)
        moved = self.nominated.get(uid) or promise
        if counted is not None and moved is not None and counted[0] != moved[0]:
            # kube-scheduler nominates any node of the domain (a gang waiting at Permit), maybe
            # one promised to another member: as for a bind elsewhere, that promise moves
            self._swap(moved[0], counted[0])

    def reset_pods(self) -> None:
        self.bound, self.promised, self.nominated, self._taken = {}, {}, {}, {}
        self._recount()

    def delete_pod(self, uid: str) -> None:
        self._sub(self.bound.pop(uid, None))
        self.release(uid)
        self._sub(self.nominated.pop(uid, None))

    def promise(self, uid: str, node: str, gpus: int) -> None:
        self.release(uid)
        if uid not in self.bound and gpus:
            self.promised[uid] = (node, gpus)
            if uid not in self.nominated:
                self._add(node, gpus)

    def release(self, uid: str) -> None:
        promise = self.promised.pop(uid, None)
        if uid not in self.nominated:
            self._sub(promise)

    def mark(self) -> None:
        """Note from now on whose free GPUs move (`freed` answers once)."""
        self._marked = {}

    def freed(self) -> bool:
        """Whether a node has more free GPUs than at `mark`: room a waiting group may take. A pod
        bound where its room was kept frees nothing (its promise becomes its binding)."""
        marked, self._marked = self._marked or {}, None
        return any(self._with_free.get(n, 0) > was for n, was in marked.items())

    # -- reads -------------------------------------------------------------------------------
    def free(self, name: str) -> int:
        info = self.nodes.get(name)
        if info is None or not info.usable:
            return 0
        return max(0, info.gpus - self._taken.get(name, 0))

    def with_free(self) -> Mapping[str, int]:
        """Usable nodes that have at least one free GPU, with their free GPUs (kept up to date
        incrementally; read-only for callers)."""
        return self._with_free

    def domain_free(self, level: Level) -> Mapping[str, int]:
        """Free GPUs per domain of the level, on its usable nodes (domains with none left out;
        kept up to date as pods and nodes come and go; read-only for callers)."""
        return self._all.sums[LEVELS.index(level)]

    def tally(self, selectors: Iterable[Selector]) -> Tally:
        """Free capacity per domain over the usable nodes that any of these selectors admits
        (read-only for callers; no selectors: every usable node). The last few distinct sets
        are kept current per event."""
        by = {s.signature: s for s in selectors}
        if not by or any(len(self.admitted(s)) == self._usable for s in by.values()):
            return self._all  # the common case: the pods may go to every usable node
        key = frozenset(by)
        tracked = self._tallies.pop(key, None)
        if tracked is None:
            tracked = _Tracked(tuple(by.values()), set(), Tally())
            for name in set().union(*(self.admitted(s) for s in by.values())):
                tracked.nodes.add(name)
                tracked.tally.add(self._where[name], self.free(name), self.nodes[name].gpus)
            if len(self._tallies) >= _TALLY_LIMIT:
                del self._tallies[next(iter(self._tallies))]  # the least recently used
        self._tallies[key] = tracked
        return tracked.tally

    def nesting(self) -> Mapping[str, tuple[str | None, ...]] | None:
        """leaf -> its leaf-pair, leaf-quad and spine, when every node of a leaf agrees on them
        and every node with a network label has a leaf (the network domains nest); else None.
        NVLink domains are not part of it: one may span two leaf domains."""
        return self._fabric.nesting()

    def where(self, node: str) -> tuple[str | None, ...]:
        """The node's domain at each level (LEVELS order), None where it has no label."""
        return self._where.get(node, ())

    def lowest(self, node: str) -> tuple[Level, str] | None:
        """The node's lowest domain: its NVLink domain where it has one, else its leaf (else the
        lowest level it is labelled with); None for a node without any level label."""
        return lowest(self.where(node))

    def order(self, level: Level) -> dict[str, int]:
        """Domain -> its position in fabric order."""
        return self._fabric.order(level)

    def levels(self) -> tuple[Level, ...]:
        """Levels at least one node is labelled with, bottom -> top."""
        return self._fabric.levels()

    def index(self) -> Index:
        """Per level: (domain, its nodes) in fabric order (NVLink domains: in the order of the
        leaf domains that hold them). Assembled when asked for; a decision reads only order()
        and the nodes of the domains it looks at (domain_nodes)."""
        return self._fabric.index()

    def domain_nodes(self, level: Level, domain: str) -> tuple[str, ...]:
        return self._fabric.nodes(level, domain)

    def admitted(self, selector: Selector) -> AbstractSet[str]:
        """Usable nodes the selector admits, kept current as nodes change (read-only for
        callers: the set itself changes with the next node event)."""
        hit = self._eligible.get(selector.signature)
        if hit is None:
            if len(self._eligible) >= _MEMO_LIMIT:
                self._eligible, self._frozen = {}, {}
            facts = (self._facts(n) for n in self.nodes.values() if n.usable)
            nodes = admitting(selector, facts)
            hit = self._eligible[selector.signature] = (selector, nodes)
        return hit[1]

    def eligible(self, selector: Selector) -> frozenset[str]:
        """Usable nodes the selector admits, as a snapshot (copied again after a node change)."""
        hit = self._frozen.get(selector.signature)
        if hit is None:
            hit = self._frozen[selector.signature] = frozenset(self.admitted(selector))
        return hit

    # -- gauges ------------------------------------------------------------------------------
    def free_total(self, nodes: Sequence[str] | None = None) -> int:
        return sum(self.free(n) for n in (self.nodes if nodes is None else nodes))

    def free_at(self, level: Level) -> int:
        """Free GPUs on the usable nodes labelled with this level (the gauge, without a walk)."""
        return sum(self._all.sums[LEVELS.index(level)].values())

    def fragmentation(self, level: Level) -> float:
        """Share of free GPUs sitting in domains of this level that are not entirely free.

        Those GPUs cannot take a job that needs a whole domain of the level (the issue's
        "free GPUs in leaf domains unable to take a full-leaf job"). 0 = every free GPU is in a
        completely free domain; 1 = no domain is completely free.
        """
        i = LEVELS.index(level)
        free, size, alloc = self._all.sums[i], self._all.size[i], self._all.alloc[i]
        members = self._fabric.domains[i]
        total = sum(free.values())
        whole = sum(  # entirely free: every node usable, and free GPUs = allocatable GPUs
            f for d, f in free.items() if f == size[d] and sum(alloc[d].values()) == len(members[d])
        )
        return 0.0 if total == 0 else 1.0 - whole / total
