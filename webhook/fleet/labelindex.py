"""Node labels, one copy per distinct set, with an inverted index (key -> value -> the label sets
that carry it) kept current on every Node event.

A pod's own nodeSelector and required node affinity are judged on these labels
(webhook.fleet.selection). Nodes of one pool share one label set, so a requirement is answered by
set operations over the index's entries (the label sets it admits), never by judging each node:
at 65,536 nodes a new constraint shape costs a few set unions, not 65,536 evaluations. What the
index cannot see (the hostname, unique per node, kept apart so that nodes still share their set;
the node's name for matchFields; our summary labels, which the node's status decides) is judged
per node or per layout by `Shape`. webhook.kube.nodeselector is the reference for every rule.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import count
from typing import Any

from webhook.fleet.layouts import KEY_INDEX, Layout
from webhook.kube.nodeselector import NODE_NAME_FIELD, expr_values, parse_int64, requirement

HOSTNAME = "kubernetes.io/hostname"
Items = tuple[tuple[str, str], ...]
INDEXED_KEYS = 64  # label keys indexed at once; the least recently asked is dropped


@dataclass(frozen=True, slots=True)
class Labels:
    """One Node's labels less our summary labels (its status decides those). The set is shared by
    every node that has the same labels (`tag` numbers it in the index); the hostname, unique per
    node, is kept apart."""

    shared: Mapping[str, str]
    hostname: str | None
    tag: int

    def get(self, key: str) -> str | None:
        return self.hostname if key == HOSTNAME else self.shared.get(key)


class _Set:
    __slots__ = ("items", "labels", "members", "tag")

    def __init__(self, items: Items, tag: int) -> None:
        self.items = items
        self.labels = dict(items)
        self.tag = tag
        self.members: set[str] = set()  # the nodes that carry exactly this set


class LabelStore:
    """Each Node's labels, one copy per distinct set with the nodes that carry it (a set no node
    has any more is dropped, from the index too), and the nodes by hostname."""

    def __init__(self) -> None:
        self._sets: dict[Items, _Set] = {}
        self._by_tag: dict[int, _Set] = {}
        self._tags = count()
        self.nodes: dict[str, Labels] = {}  # read it, never write it
        # key -> value -> tags of the label sets with key=value, built for a key when a shape
        # first asks of it (most keys never are: no memory for them), kept current after that.
        self._index: OrderedDict[str, dict[str, set[int]]] = OrderedDict()
        self._keys: Counter[str] = Counter()  # key -> label sets that carry it
        # hostname -> the nodes that carry it, for a hostname that is not the node's own name
        # (the usual hostname is: nothing kept for it)
        self._hosts: dict[str, set[str]] = {}
        self.no_hostname: set[str] = set()

    @staticmethod
    def items(labels: Mapping[str, Any]) -> Items:
        return tuple(
            sorted(
                (str(k), str(v)) for k, v in labels.items() if k not in KEY_INDEX and k != HOSTNAME
            )
        )

    def get(self, name: str) -> Labels | None:
        return self.nodes.get(name)

    @property
    def tags(self) -> int:
        """How many distinct label sets there are."""
        return len(self._by_tag)

    def put(self, name: str, labels: Mapping[str, Any] | None) -> bool:
        """Set (None: forget) a node's labels; whether they changed."""
        old = self.nodes.get(name)
        if labels is None:
            if old is None:
                return False
            self._leave(name, old.tag)
            self._host(name, old.hostname, False)
            del self.nodes[name]
            return True
        host = labels.get(HOSTNAME)
        hostname = str(host) if host is not None else None
        key = self.items(labels)
        entry = self._sets.get(key) or self._add(key)
        if old is not None and old.hostname == hostname and old.tag == entry.tag:
            return False
        if old is None or old.tag != entry.tag:
            entry.members.add(name)
            if old is not None:
                self._leave(name, old.tag)
        if old is None or old.hostname != hostname:
            if old is not None:
                self._host(name, old.hostname, False)
            self._host(name, hostname, True)
        self.nodes[name] = Labels(entry.labels, hostname, entry.tag)
        return True

    def _add(self, key: Items) -> _Set:
        entry = self._sets[key] = _Set(key, next(self._tags))
        self._by_tag[entry.tag] = entry
        for k, v in key:
            self._keys[k] += 1
            values = self._index.get(k)
            if values is not None:
                values.setdefault(v, set()).add(entry.tag)
        return entry

    def _leave(self, name: str, tag: int) -> None:
        entry = self._by_tag[tag]
        entry.members.discard(name)
        if entry.members:
            return
        del self._sets[entry.items], self._by_tag[tag]
        for k, v in entry.items:
            self._keys[k] -= 1
            if not self._keys[k]:
                del self._keys[k]
                self._index.pop(k, None)
                continue
            values = self._index.get(k)
            if values is not None:
                values[v].discard(tag)
                if not values[v]:
                    del values[v]

    def postings(self, key: str) -> Mapping[str, set[int]]:
        """value -> the tags of the label sets with key=value (read it, never write it)."""
        values = self._index.get(key)
        if values is not None:
            self._index.move_to_end(key)
            return values
        if key not in self._keys:
            return {}
        values = self._index[key] = {}
        for entry in self._by_tag.values():
            v = entry.labels.get(key)
            if v is not None:
                values.setdefault(v, set()).add(entry.tag)
        if len(self._index) > INDEXED_KEYS:
            self._index.popitem(last=False)
        return values

    def _host(self, name: str, hostname: str | None, add: bool) -> None:
        if hostname is None:
            (self.no_hostname.add if add else self.no_hostname.discard)(name)
        elif hostname != name:
            if add:
                self._hosts.setdefault(hostname, set()).add(name)
            elif hostname in self._hosts:
                self._hosts[hostname].discard(name)
                if not self._hosts[hostname]:
                    del self._hosts[hostname]

    def by_hostname(self, hostname: str) -> set[str]:
        """The nodes whose hostname label is this."""
        out = set(self._hosts.get(hostname, ()))
        own = self.nodes.get(hostname)
        if own is not None and own.hostname == hostname:
            out.add(hostname)
        return out

    def members(self, tags: set[int]) -> set[str]:
        """The nodes that carry one of these label sets."""
        sets = self._by_tag
        return set().union(*(sets[t].members for t in tags))

    def names(self) -> set[str]:
        return set(self.nodes)

    def all_tags(self) -> set[int]:
        return set(self._by_tag)


def label_sets(store: LabelStore, expr: Mapping[str, Any]) -> set[int]:
    """The tags of the label sets one matchExpressions entry admits (on a key the shared sets
    hold): nodeselector.requirement's rules, over the index."""
    key, op, values = expr.get("key"), expr.get("operator"), expr_values(expr)
    if not isinstance(key, str) or not isinstance(op, str) or values is None:
        return set()
    entries = store.postings(key)
    if op in ("In", "NotIn"):
        if not values:
            return set()
        inside: set[int] = set()
        for v in set(values):
            inside.update(entries.get(v, ()))
        return inside if op == "In" else store.all_tags() - inside
    if op in ("Exists", "DoesNotExist"):
        if values:
            return set()
        having: set[int] = set()
        for tags in entries.values():
            having.update(tags)
        return having if op == "Exists" else store.all_tags() - having
    if op in ("Gt", "Lt"):
        bound = parse_int64(values[0]) if len(values) == 1 else None
        if bound is None:
            return set()
        out: set[int] = set()
        for v, tags in entries.items():
            number = parse_int64(v)
            if number is not None and (number > bound if op == "Gt" else number < bound):
                out.update(tags)
        return out
    return set()


class _Term:
    """One nodeSelectorTerm (the nodeSelector ANDed in): the labelled nodes its expressions on Node
    labels, hostname and name admit (`nodes`, None for all of them), and its expressions on our
    summary labels, judged per layout (memoized by the values they read)."""

    __slots__ = ("by_layout", "memo", "nodes", "tags")

    def __init__(self) -> None:
        self.tags: set[int] | None = None
        self.nodes: set[str] | None = None
        self.by_layout: list[Mapping[str, Any]] = []
        self.memo: dict[tuple[str | None, ...], bool] = {}

    def holds_on(self, layout: Layout) -> bool:
        if not self.by_layout:
            return True
        values = tuple(layout.values[KEY_INDEX[e["key"]]] for e in self.by_layout)
        ok = self.memo.get(values)
        if ok is None:
            labels = {
                e["key"]: v for e, v in zip(self.by_layout, values, strict=True) if v is not None
            }
            ok = self.memo[values] = all(requirement(e, labels).ok for e in self.by_layout)
        return ok


Admitted = list[tuple[Layout, set[str]]] | None  # per layout the nodes admitted; None: every node


class Shape:
    """A pod's nodeSelector and required nodeSelectorTerms, judged against the index as it stands
    (built, used and dropped under the cache lock: a later label set is not in it)."""

    def __init__(self, store: LabelStore, selector: Any, terms: list[Any] | None) -> None:
        self.store = store
        self.terms: list[_Term] = []
        for t in [None] if terms is None else terms:  # None: the nodeSelector alone
            term = self._term(t, selector, terms is None)
            if term is not None:
                self.terms.append(term)

    def _term(self, t: Any, selector: Any, only_selector: bool) -> _Term | None:
        """None: the term admits no node whose labels are known."""
        term = _Term()
        exprs: list[Any] = []
        fields: list[Any] = []
        if isinstance(selector, Mapping):
            for k, want in selector.items():
                if not isinstance(want, str):
                    return None  # a label value is a string: nothing else equals one
                exprs.append({"key": str(k), "operator": "In", "values": [want]})
        if not only_selector:
            if not isinstance(t, Mapping):
                return None
            own, fields = t.get("matchExpressions") or [], t.get("matchFields") or []
            if not isinstance(own, list) or not isinstance(fields, list) or not own + fields:
                return None  # unusable, or empty: an empty term matches no node
            exprs += own
        on_host = []
        for e in exprs:
            if not isinstance(e, Mapping):
                return None
            key = e.get("key")
            if key in KEY_INDEX:
                term.by_layout.append(e)
            elif key == HOSTNAME:
                on_host.append(e)
            else:
                tags = label_sets(self.store, e)
                term.tags = tags if term.tags is None else term.tags & tags
        store = self.store
        if term.tags is not None:
            term.nodes = store.members(term.tags) if len(term.tags) < store.tags else None
        for e in on_host:
            term.nodes = _on_hostname(store, e, term.nodes)
        for e in fields:
            term.nodes = _on_name(store, e, term.nodes) if isinstance(e, Mapping) else set()
        return None if term.nodes is not None and not term.nodes else term

    def admitted(self, members: Iterable[tuple[Layout, set[str]]]) -> Admitted:
        """Of each layout, the nodes the shape admits (a node whose labels are unknown counts as
        admitted); None when that is every node. Set operations over the names: no node is judged
        on its own."""
        free = [t.nodes for t in self.terms if not t.by_layout]
        layered = [t for t in self.terms if t.by_layout]
        base: set[str] = set()
        for nodes in free:
            if nodes is None:
                return None
            base |= nodes
        unions: dict[tuple[int, ...], set[str] | None] = {}  # which layered terms hold -> nodes
        known = self.store.nodes
        out, everyone = [], True
        for layout, names in members:
            live = tuple(i for i, t in enumerate(layered) if t.holds_on(layout)) if layered else ()
            if live not in unions:
                parts = [layered[i].nodes for i in live]
                unions[live] = None if None in parts else base.union(*parts)  # type: ignore[arg-type]
            nodes = unions[live]
            if nodes is None:
                keep = set(names)
            else:
                keep = names & nodes
                if len(keep) < len(names):
                    keep |= names.difference(known)  # labels unknown: admitted
                    everyone = everyone and len(keep) == len(names)
            if keep:
                out.append((layout, keep))
        return None if everyone else out


def _on_hostname(store: LabelStore, e: Mapping[str, Any], nodes: set[str] | None) -> set[str]:
    """ANDs an expression on the hostname into `nodes` (None: every labelled node)."""
    op, values = e.get("operator"), expr_values(e)
    if op in ("In", "NotIn") and values:
        named: set[str] = set().union(*(store.by_hostname(v) for v in set(values)))
        if op == "In":
            return named if nodes is None else nodes & named
        return (set(store.nodes) if nodes is None else nodes) - named
    if op in ("Exists", "DoesNotExist") and values == []:
        if op == "DoesNotExist":
            return set(store.no_hostname) if nodes is None else nodes & store.no_hostname
        return (set(store.nodes) if nodes is None else nodes) - store.no_hostname
    # Gt / Lt on a hostname, or an unusable expression: judged node by node.
    nodes = set(store.nodes) if nodes is None else nodes
    return {n for n in nodes if requirement(e, _host_labels(store.nodes[n])).ok}


def _host_labels(labels: Labels) -> dict[str, str]:
    return {HOSTNAME: labels.hostname} if labels.hostname is not None else {}


def _on_name(store: LabelStore, e: Mapping[str, Any], nodes: set[str] | None) -> set[str]:
    """ANDs a matchFields entry into `nodes`: metadata.name In / NotIn with exactly one value."""
    op, values = e.get("operator"), expr_values(e)
    if e.get("key") != NODE_NAME_FIELD or op not in ("In", "NotIn") or len(values or ()) != 1:
        return set()  # the scheduler refuses the term
    name = values[0]  # type: ignore[index]
    if op == "In":
        return {name} if nodes is None else nodes & {name}  # an unknown name: admitted anyway
    return (set(store.nodes) if nodes is None else nodes) - {name}
