"""The nodes a pod's own nodeSelector and required node affinity admit, judged on the Node labels.

The fleet's queries decide only our summary labels; a pod that also says `pool: azure`, a zone or a
network position must not have its HCA list (or its hca-profile pin, or the "no node satisfies"
warning) decided by nodes it can never run on. When the Node labels are known (the webhook's Node
watch, or Node objects given offline), each distinct shape of those constraints gets its own Fleet
of the admitted nodes, built once by one pass over the nodes and then kept current on every node
change, like the fleet's views. Pods whose constraints name none but our summary labels (most
pods) never come here.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from webhook.fleet.labelindex import Labels, LabelStore, Shape
from webhook.fleet.layouts import KEY_INDEX, Cond, Fleet, Layout
from webhook.kube.nodeselector import affinity_terms, pod_admits

__all__ = [
    "MAX_SELECTIONS",
    "NO_OWN",
    "SCOPE",
    "LabelStore",
    "Labels",
    "Own",
    "Selections",
    "as_cond",
    "own_conds",
]

MAX_SELECTIONS = 16  # distinct constraint shapes remembered; the least recently asked is dropped
SCOPE = (
    "the pod's own nodeSelector and required node affinity "
    "(no node with a GpuNodeStatus has the labels they ask for)"
)


def _foreign(selector: Any, terms: list[Any] | None) -> bool:
    if isinstance(selector, Mapping) and any(k not in KEY_INDEX for k in selector):
        return True
    for t in terms or ():
        if not isinstance(t, Mapping) or t.get("matchFields"):
            return True
        for e in t.get("matchExpressions") or ():
            if not isinstance(e, Mapping) or e.get("key") not in KEY_INDEX:
                return True
    return False


Constraints = tuple[Any, list[Any] | None]  # spec.nodeSelector, required nodeSelectorTerms
Raw = tuple[Any, Any]  # spec.nodeSelector, spec.affinity: as they stand in the pod, not copied
# The part of those constraints the fleet's queries decide: the nodeSelector's and each required
# term's expressions on our summary labels, in Query form (what placement's query is built from).
Own = tuple[tuple[Cond, ...], tuple[tuple[Cond, ...], ...]]
NO_OWN: Own = ((), ())


_MAPPING = (dict, Mapping)  # made once (`dict | Mapping` in a call builds a union each time)


def as_cond(expr: Mapping[str, Any]) -> Cond:
    values = expr.get("values") or ()
    return (str(expr["key"]), str(expr.get("operator")), tuple(str(v) for v in values))


def own_conds(selector: Any, terms: list[Any] | None) -> Own:
    """The Own of a pod's spec.nodeSelector and required nodeSelectorTerms."""
    own = (
        tuple((str(k), "In", (str(v),)) for k, v in selector.items() if k in KEY_INDEX)
        if selector
        else ()
    )
    out: list[tuple[Cond, ...]] = []
    for term in terms or ():
        conds: list[Cond] = []
        if isinstance(term, dict):
            for expr in term.get("matchExpressions") or ():
                # the key test first: most expressions are on other labels
                if isinstance(expr, dict) and expr.get("key") in KEY_INDEX:
                    conds.append(as_cond(expr))
        out.append(tuple(conds))
    return own, tuple(out)


def _key(found: Constraints) -> str:
    """Tells shapes apart exactly (repr: the cheapest exact text of decoded JSON; a different key
    order only costs a second selection). Built only when no kept shape is == (_Selection.found)."""
    return repr(found)


class _Selection:
    __slots__ = ("constraints", "everyone", "fleet", "found", "key", "keys", "own", "pod", "raw")

    def __init__(self, found: Constraints, key: str, whole: Fleet) -> None:
        # A copy: admission edits the pod (and so these very lists) in place.
        selector, terms = copy.deepcopy(found)
        self.key = key
        self.constraints: Constraints = (selector, terms)
        # What a pod's constraints are compared with (Selections): `==` on the decoded JSON, no
        # key built (a fraction of a microsecond, where repr took microseconds per review).
        # Equal values of different types (1 == 1.0 == True) decide alike: the evaluator asks
        # only "is it a string" of a value and the truth of a term's fields, the same for equal
        # numbers; not of a nodeSelector key (node_selector reads str(key)), so a selector with
        # a key that is not a string is found by its key only. NaN is never equal: such a pod
        # too takes the keyed path.
        exact = not isinstance(selector, Mapping) or all(isinstance(k, str) for k in selector)
        self.found: Constraints | None = (selector, terms) if exact else None
        spec: dict[str, Any] = {"nodeSelector": selector} if selector else {}
        if terms is not None:
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
                }
            }
        self.pod = {"spec": spec}
        # The raw form of these constraints (a pod whose affinity is only them has it): found
        # with no nodeSelectorTerms read; nothing kept twice.
        self.raw: Raw | None = (selector, spec.get("affinity")) if exact else None
        self.keys = _keys(selector, terms)
        self.own = own_conds(selector, terms)
        # Its own fleet of the nodes it admits; while it admits every node (a zone that every
        # node carries), the whole fleet, with the views alike pods have built.
        self.fleet = whole
        self.everyone = True

    def admits(self, name: str, layout: Layout, labels: Labels | None) -> bool:
        if labels is None:  # a node whose labels are unknown counts as met (the safe side)
            return True
        found = {}
        for k in self.keys:
            i = KEY_INDEX.get(k)
            v = layout.values[i] if i is not None else labels.get(k)
            if v is not None:
                found[k] = v
        return pod_admits(self.pod, found, name)


def _keys(selector: Any, terms: Any) -> tuple[str, ...]:
    keys = {str(k) for k in selector} if isinstance(selector, Mapping) else set()
    for t in terms or ():
        for e in (t.get("matchExpressions") or ()) if isinstance(t, Mapping) else ():
            if isinstance(e, Mapping) and isinstance(e.get("key"), str):
                keys.add(e["key"])
    return tuple(sorted(keys))


class Selections:
    """The Fleets of the constraint shapes reviews asked about (writers hold the cache lock)."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._by_key: OrderedDict[str, _Selection] = OrderedDict()
        # The most recently asked selection (the end of _by_key): its raw constraints, fleet and
        # Own, one reference replaced whole under the lock, so a reader needs no lock (scope_for).
        self._last: tuple[Raw | None, Fleet, Own] | None = None
        # What the selections are built from (the cache's, set by scope_for).
        self._whole: Fleet | None = None
        self._labels: LabelStore | None = None

    def scope_for(
        self, pod: Mapping[str, Any], whole: Fleet, labels: LabelStore
    ) -> tuple[Fleet, Own]:
        """The fleet of the nodes the pod's own constraints admit: the whole fleet when there are
        none or they name no label but our summary labels (the fleet's query decides those); else
        their selection's, built on first use from the whole fleet, layout by layout. With it, the
        constraints' Own (so a review reads the pod's own affinity once: here).

        Callers need not hold the lock. The usual review (alike pods come in runs) reads only
        `_last`: the most recent selection is never the one dropped (a new one goes in after it,
        the oldest goes out), so its fleet is kept current; anything else takes the lock. A pod
        that passed review.pod_problems holds only strings where Own reads, so constraints that
        are == have the same Own."""
        spec = pod.get("spec")
        if not isinstance(spec, _MAPPING):  # dict first: a decoded pod's passes at once
            return whole, NO_OWN
        selector, affinity = spec.get("nodeSelector"), spec.get("affinity")
        if not selector and not affinity:  # the usual pod: two dict lookups and out
            return whole, NO_OWN
        last = self._last
        if last is not None and (selector, affinity) == last[0]:
            return last[1], last[2]
        with self._lock:
            return self._scope(selector, affinity, whole, labels)

    def _scope(
        self, selector: Any, affinity: Any, whole: Fleet, labels: LabelStore
    ) -> tuple[Fleet, Own]:
        terms = affinity_terms(affinity)
        if not selector and terms is None:
            return whole, NO_OWN
        found = (selector, terms)
        for kept in reversed(self._by_key.values()):
            if found == kept.found:
                return self._use(kept)
        if not _foreign(*found):
            return whole, own_conds(selector, terms)
        key = _key(found)
        known = self._by_key.get(key)
        if known is not None:
            return self._use(known)
        self._whole, self._labels = whole, labels
        sel = _Selection(found, key, whole)
        self._build(sel, whole, labels)
        self._by_key[key] = sel
        if len(self._by_key) > MAX_SELECTIONS:
            self._by_key.popitem(last=False)
        return self._use(sel)

    def _build(self, sel: _Selection, whole: Fleet, labels: LabelStore) -> None:
        """One pass over the layouts; which of a layout's nodes are admitted comes from the label
        index (webhook.fleet.labelindex), by set operations, not from judging each node."""
        admitted = Shape(labels, *sel.constraints).admitted(whole.members())
        sel.everyone = admitted is None and len(whole) > 0
        sel.fleet = whole if sel.everyone else Fleet(self._lock, scope=SCOPE)
        if not sel.everyone:
            sel.fleet.fill(admitted or ())

    def _use(self, sel: _Selection) -> tuple[Fleet, Own]:
        self._by_key.move_to_end(sel.key)
        self._last = sel.raw, sel.fleet, sel.own
        return sel.fleet, sel.own

    def update(
        self, name: str, old: Layout | None, new: Layout | None, labels: Labels | None
    ) -> None:
        """One node's layout or labels changed (the whole fleet and the label store have it)."""
        whole, store = self._whole, self._labels
        for sel in self._by_key.values():
            ok = new is not None and sel.admits(name, new, labels)
            if not sel.everyone:
                if old is not None:
                    sel.fleet.remove(name, old)
                if new is not None and ok:
                    sel.fleet.add(name, new)
            elif new is not None and not ok and whole is not None and store is not None:
                self._build(sel, whole, store)  # no longer every node: it gets its own fleet
        if self._by_key:
            self._use(next(reversed(self._by_key.values())))

    def clear(self) -> None:
        self._by_key.clear()
        self._last = None

    def __len__(self) -> int:
        return len(self._by_key)
