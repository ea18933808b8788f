"""The nodes as the webhook sees them: distinct layouts, and per-query candidate totals.

A review asks one question of the fleet: over the nodes the pod's required node affinity admits,
how many are there, which HCAs are usable on all of them, how far is the worst GPU from its HCA,
and (for the hca pin) which hca-profiles hold a given HCA list. A `Query` is the part of the
affinity that our labels decide, in a canonical form; each query asked gets a `_View` of running
totals, built once by one pass over the layouts and then kept current on every node change
(O(views) per change, not a rebuild). So a review reads a few counters whatever the fleet's size,
and the first review after a watch event costs no more than the next one.
"""

from __future__ import annotations

import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from common import api
from common.model import DISTANCE_ORDER

Cond = tuple[str, str, tuple[str, ...]]  # (label key, operator, values) on one of api.ALL_LABELS
Query = tuple[tuple[Cond, ...], ...]  # terms ORed, conds in a term ANDed; ((),) admits every node
ADMIT_ALL: Query = ((),)
KEY_INDEX = {key: i for i, key in enumerate(api.ALL_LABELS)}
# What the views keep is bounded in entries and in size (issue 17: memory under review load):
MAX_VIEWS = 64  # distinct pod shapes remembered; the least recently asked is dropped
VIEW_VALUES = 256  # a query with more values than this (all terms) is answered, not remembered
MAX_PINS = 16  # preferred-HCA lists remembered per view; the table is emptied when full
PIN_NAMES = 64  # a longer preferred-HCA list is answered, not remembered


@dataclass(frozen=True, slots=True)
class Layout:
    """What the webhook decides on for a node; nodes with equal layouts are interchangeable."""

    values: tuple[str | None, ...]  # label values in api.ALL_LABELS order (None: label absent)
    usable_hcas: tuple[str, ...]
    gdr_level: str  # worst GPU -> nearest usable HCA distance on the node ("" if none)

    @property
    def labels(self) -> dict[str, str]:
        return {k: v for k, v in zip(api.ALL_LABELS, self.values, strict=True) if v is not None}

    @classmethod
    def of(cls, labels: Mapping[str, str], usable_hcas: Iterable[str], gdr_level: str) -> Layout:
        return cls(tuple(labels.get(k) for k in api.ALL_LABELS), tuple(usable_hcas), gdr_level)


@dataclass(frozen=True, slots=True)
class Group:
    """Nodes that look identical to the webhook (one layout) and their names."""

    labels: Mapping[str, str]
    usable_hcas: tuple[str, ...]
    gdr_level: str
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Candidates:
    nodes: int  # nodes the query admits
    common_hcas: tuple[str, ...]  # usable on every one of them
    gdr_level: str  # the worst of their GDR levels ("" if none)


# eq=False: a view hands out the same Pin until its nodes change, so identity tells pins apart;
# placement memoizes what it says about one by it, without hashing the tuples per review.
@dataclass(frozen=True, slots=True, eq=False)
class Pin:
    hcas: tuple[str, ...]  # the NCCL_IB_HCA list
    profiles: tuple[str, ...]  # every hca-profile among the candidates on which all are usable
    nodes: int
    gdr_level: str


def cond_holds(cond: Cond, values: tuple[str | None, ...]) -> bool:
    """One expression against one layout, as the scheduler judges a node selector requirement."""
    key, op, wanted = cond
    value = values[KEY_INDEX[key]]
    if op == "In":
        return value is not None and value in wanted
    if op == "NotIn":
        return value is None or value not in wanted
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and wanted:
        try:
            have, bound = int(value), int(wanted[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def query_holds(query: Query, values: tuple[str | None, ...]) -> bool:
    return any(all(cond_holds(c, values) for c in term) for term in query)


def hca_order(name: str) -> tuple[tuple[int, str], ...]:
    """mlx5_2 before mlx5_10, as the agent lists them."""
    return tuple((int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"(\d+)", name) if p)


def _worst(levels: Iterable[str]) -> str:
    return max(levels, key=DISTANCE_ORDER.__getitem__, default="")


def _bump(counter: Counter[str], key: str, delta: int) -> None:
    counter[key] += delta
    if not counter[key]:
        del counter[key]


class _Profile:
    """Totals for the candidate nodes that carry one hca-profile label value."""

    __slots__ = ("gdr", "nodes", "usable")

    def __init__(self) -> None:
        self.nodes = 0
        self.usable: Counter[tuple[str, ...]] = Counter()
        self.gdr: Counter[str] = Counter()


def query_size(query: Query) -> int:
    """Values in a query, counted over every term (what remembering it costs)."""
    return sum(len(cond[2]) + 1 for term in query for cond in term)


Totalled = tuple[tuple[str, ...], str, str]  # usable HCAs, hca-profile, GDR level
_PROFILE = KEY_INDEX[api.LABEL_HCA_PROFILE]


def _totalled(layout: Layout) -> Totalled:
    """All of a layout a view's totals read: layouts alike in it are added up once (a fleet
    whose every node is its own layout still has few of these)."""
    return layout.usable_hcas, layout.values[_PROFILE] or "", layout.gdr_level


class _View:
    """Running totals over the nodes one query admits."""

    __slots__ = ("answer", "gdr", "hcas", "nodes", "pins", "profiles", "query")

    def __init__(self, query: Query) -> None:
        self.query = query
        self.nodes = 0
        self.hcas: Counter[str] = Counter()
        self.gdr: Counter[str] = Counter()
        self.profiles: dict[str, _Profile] = {}
        self.answer: Candidates | None = None
        self.pins: dict[tuple[str, ...], Pin | None] = {}

    def apply(self, layout: Layout, delta: int) -> None:
        self.add(_totalled(layout), delta)

    def add(self, part: Totalled, delta: int) -> None:
        """delta nodes of layouts that read alike here (_totalled)."""
        usable_hcas, name, gdr_level = part
        self.answer, self.pins = None, {}
        self.nodes += delta
        for h in usable_hcas:
            _bump(self.hcas, h, delta)
        prof = self.profiles.get(name) or self.profiles.setdefault(name, _Profile())
        prof.nodes += delta
        prof.usable[usable_hcas] += delta
        if not prof.usable[usable_hcas]:
            del prof.usable[usable_hcas]
        if gdr_level:
            _bump(self.gdr, gdr_level, delta)
            _bump(prof.gdr, gdr_level, delta)
        if not prof.nodes:
            del self.profiles[name]

    def candidates(self) -> Candidates:
        if self.answer is None:
            common = sorted((h for h, n in self.hcas.items() if n == self.nodes), key=hca_order)
            self.answer = Candidates(self.nodes, tuple(common), _worst(self.gdr))
        return self.answer

    def pin(self, preferred: tuple[str, ...]) -> Pin | None:
        if preferred in self.pins:
            return self.pins[preferred]
        pin = self._pin(preferred)
        if len(preferred) <= PIN_NAMES:  # preferred lists come from pods: keep few, and short
            if len(self.pins) >= MAX_PINS:
                self.pins.clear()
            self.pins[preferred] = pin
        return pin

    def _pin(self, preferred: tuple[str, ...]) -> Pin | None:
        # The HCA list: what the most common profile offers (narrowed to the preferred HCAs);
        # on a tie, the profile with more usable HCAs (rails), then the smaller profile value
        # (docs/usage.md). Then keep every profile on which that whole list is usable.
        # Only the profiles tied with the first that offers a list are compared (O(profiles) only
        # for the sort, as a review after a watch event pays it).
        ranked = sorted(self.profiles.items(), key=lambda kv: (-kv[1].nodes, kv[0]))
        best: set[str] = set()
        most = 0
        for _, prof in ranked:
            if best and prof.nodes < most:
                break
            common = set.intersection(*(set(u) for u in prof.usable))
            if preferred:
                common &= set(preferred)
            if len(common) > len(best):
                best, most = common, prof.nodes
        if not best:
            return None
        common = best
        keep = sorted(
            name for name, p in self.profiles.items() if all(common <= set(u) for u in p.usable)
        )
        return Pin(
            hcas=tuple(sorted(common, key=hca_order)),
            profiles=tuple(keep),
            nodes=sum(self.profiles[n].nodes for n in keep),
            gdr_level=_worst(lv for n in keep for lv in self.profiles[n].gdr),
        )


class Fleet:
    """Layouts with their node names, and the views of the queries reviews have asked.

    Writers (the cache, under `lock`) call add/remove; readers call candidates/pin/groups, which
    take the same lock, so a review never sees a half-applied change.
    """

    def __init__(self, lock: threading.Lock | None = None, scope: str = "") -> None:
        self.lock = lock or threading.Lock()
        # What restricts these nodes beyond the statuses ("" for the whole fleet), for the
        # warning when none is left (webhook.fleet.selection).
        self.scope = scope
        self._members: dict[Layout, tuple[Layout, set[str]]] = {}
        self._views: OrderedDict[Query, _View] = OrderedDict()

    @classmethod
    def of_groups(cls, groups: Iterable[Group]) -> Fleet:
        fleet = cls()
        for g in groups:
            for name in g.nodes:
                fleet.add(name, Layout.of(g.labels, g.usable_hcas, g.gdr_level))
        return fleet

    def add(self, name: str, layout: Layout) -> Layout:
        """Count a node with this layout; returns the fleet's own equal copy of the layout, so
        alike nodes share one object. Callers hold `lock`."""
        entry = self._members.get(layout)
        if entry is None:
            entry = self._members[layout] = (layout, set())
        if name not in entry[1]:
            entry[1].add(name)
            self._apply(layout, 1)
        return entry[0]

    def fill(self, members: Iterable[tuple[Layout, set[str]]]) -> None:
        """Set the nodes of a fleet that has none yet, layout by layout (callers hold `lock`
        and hand over the sets)."""
        self._members = {layout: (layout, names) for layout, names in members if names}
        self._views.clear()

    def members(self) -> Iterator[tuple[Layout, set[str]]]:
        """Each layout and its node names, live (callers hold `lock` and do not keep them)."""
        return ((layout, names) for layout, (_, names) in self._members.items())

    def remove(self, name: str, layout: Layout) -> None:
        entry = self._members.get(layout)
        if entry is None or name not in entry[1]:
            return
        entry[1].discard(name)
        if not entry[1]:
            del self._members[layout]
        self._apply(layout, -1)

    def _apply(self, layout: Layout, delta: int) -> None:
        for view in self._views.values():
            if query_holds(view.query, layout.values):
                view.apply(layout, delta)

    def _view(self, query: Query) -> _View:
        view = self._views.get(query)
        if view is not None:
            self._views.move_to_end(query)
            return view
        view = _View(query)
        parts: Counter[Totalled] = Counter()
        for layout, (_, names) in self._members.items():
            if query_holds(query, layout.values):
                parts[_totalled(layout)] += len(names)
        for part, n in parts.items():
            view.add(part, n)
        if query_size(query) <= VIEW_VALUES:  # a pod's own lists can be as long as the pod
            self._views[query] = view
            if len(self._views) > MAX_VIEWS:
                self._views.popitem(last=False)
        return view

    def candidates(self, query: Query) -> Candidates:
        with self.lock:
            return self._view(query).candidates()

    def pin(self, query: Query, preferred: tuple[str, ...]) -> Pin | None:
        with self.lock:
            return self._view(query).pin(preferred)

    def groups(self, query: Query = ADMIT_ALL) -> tuple[Group, ...]:
        """The layouts a query admits, with their nodes (for explain and tests: O(layouts))."""
        with self.lock:
            found = [
                Group(layout.labels, layout.usable_hcas, layout.gdr_level, tuple(sorted(names)))
                for layout, (_, names) in self._members.items()
                if query_holds(query, layout.values)
            ]
        return tuple(sorted(found, key=lambda g: g.nodes))

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Iterator[Group]:
        return iter(self.groups())
