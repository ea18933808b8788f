"""The label index decides exactly as webhook.kube.nodeselector does node by node (issue 22: the
first review of a new constraint shape at 65,536 nodes): random Node labels and random shapes
(In, NotIn, Exists, DoesNotExist, Gt, Lt, unusable expressions, matchFields, several terms, a
nodeSelector), through the cache as serve fills it, after label changes, and with more shapes in
use than are kept."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common import api
from tests.webhook.helpers import golden_statuses, pod
from webhook.fleet.cache import FabricCache
from webhook.fleet.labelindex import HOSTNAME, LabelStore, Shape
from webhook.fleet.layouts import Layout
from webhook.fleet.selection import MAX_SELECTIONS, _foreign
from webhook.kube.nodeselector import pod_admits

STATUSES = dict(golden_statuses())
NAMES = [f"n{i}" for i in range(10)]
KEYS = ["zone", "pool", "rank", HOSTNAME, "metadata.name", api.LABEL_RDMA_PORTS]
VALUES = ["a", "b", "", "1", "5", "-3", "10", "n1", "n2", "x y"]
OPS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus", 7]

values = st.one_of(
    st.lists(st.sampled_from(VALUES), max_size=3),
    st.none(),
    st.just(["1", 2]),  # not all strings: the scheduler refuses the requirement
)
expr = st.fixed_dictionaries(
    {"key": st.sampled_from([*KEYS, 3]), "operator": st.sampled_from(OPS), "values": values}
)
fields = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["metadata.name", "metadata.uid"]),
        "operator": st.sampled_from(["In", "NotIn", "Exists"]),
        "values": st.lists(st.sampled_from(NAMES), max_size=2),
    }
)
term = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "matchExpressions": st.lists(expr, max_size=3),
            "matchFields": st.lists(fields, max_size=1),
        },
    ),
    st.just("not a term"),
    st.just({"matchExpressions": {"key": "zone"}}),  # not a list
)
selector = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["zone", "pool", HOSTNAME, api.LABEL_RDMA_PORTS]),
        st.one_of(st.sampled_from(VALUES), st.just(5)),
        max_size=2,
    ),
)
shape = st.tuples(selector, st.one_of(st.none(), st.lists(term, max_size=3)))
node_labels = st.dictionaries(
    st.sampled_from(["zone", "pool", "rank", HOSTNAME, "metadata.name"]),
    st.sampled_from(VALUES),
    max_size=4,
)
fleet_labels = st.dictionaries(st.sampled_from(NAMES), node_labels)  # a name left out: unknown


def _merged(layout: Layout, labels: dict[str, str]) -> dict[str, str]:
    """The node as the scheduler sees it: its Node labels, our summary labels from its status."""
    return {**{k: v for k, v in labels.items() if k not in api.ALL_LABELS}, **layout.labels}


def _spec(sel: Any, terms: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeSelector": sel} if sel else {}
    if terms is not None:
        required = {"nodeSelectorTerms": terms}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
        }
    return spec


def _expected(
    cache: FabricCache, labels: dict[str, dict[str, str]], spec: dict[str, Any]
) -> set[str]:
    return {
        name
        for name, record in cache.nodes.items()
        if name not in labels
        or pod_admits({"spec": spec}, _merged(record.layout, labels[name]), name)
    }


def _cache(labels: dict[str, dict[str, str]]) -> FabricCache:
    statuses = list(STATUSES.values())
    cache = FabricCache()
    cache.replace_nodes([(n, statuses[i % len(statuses)]) for i, n in enumerate(NAMES)])
    cache.replace_claims([])
    cache.replace_existing_nodes(NAMES, labels)
    return cache


def _nodes(cache: FabricCache, spec: dict[str, Any]) -> set[str]:
    return {n for g in cache.fleet_for(pod(**spec)).groups() for n in g.nodes}


def _through_cache(shape: tuple[Any, Any], want: set[str], cache: FabricCache) -> set[str]:
    """What the cache should answer: a shape on our summary labels alone keeps the whole fleet
    (the fleet's own queries decide those)."""
    return want if _foreign(*shape) else set(cache.nodes)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(labels=fleet_labels, shape=shape)
def test_the_index_admits_exactly_the_nodes_the_per_node_rules_admit(
    labels: dict[str, dict[str, str]], shape: tuple[Any, Any]
) -> None:
    cache = _cache(labels)
    store = LabelStore()
    for name, own in labels.items():
        store.put(name, own)
    got = Shape(store, *shape).admitted(cache.groups().members())
    want = _expected(cache, labels, _spec(*shape))
    found = set(cache.nodes) if got is None else {n for _, names in got for n in names}
    assert found == want
    assert _nodes(cache, _spec(*shape)) == _through_cache(shape, want, cache)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=fleet_labels,
    changes=st.lists(st.tuples(st.sampled_from(NAMES), st.one_of(st.none(), node_labels))),
    shapes=st.lists(shape, min_size=1, max_size=4),
)
def test_label_changes_keep_every_kept_shape_exact(
    before: dict[str, dict[str, str]],
    changes: list[tuple[str, dict[str, str] | None]],
    shapes: list[tuple[Any, Any]],
) -> None:
    cache = _cache(before)
    for s in shapes:
        _nodes(cache, _spec(*s))  # each shape built on the labels as they were
    labels = dict(before)
    for name, new in changes:
        if new is None:  # the Node is deleted: its status no longer counts
            cache.node_exists(name, False)
            labels.pop(name, None)
        else:
            cache.node_exists(name, True, new)
            labels[name] = new
        for s in shapes:
            want = _expected(cache, labels, _spec(*s))
            assert _nodes(cache, _spec(*s)) == _through_cache(s, want, cache)
            # The index kept current by those changes answers a shape built now alike.
            assert cache._labels is not None
            got = Shape(cache._labels, *s).admitted(cache.groups().members())
            assert (set(cache.nodes) if got is None else {n for _, ns in got for n in ns}) == want


def test_more_shapes_than_kept_stay_exact_round_robin() -> None:
    labels = {n: {"zone": f"z{i % 5}", "pool": f"p{i % 3}"} for i, n in enumerate(NAMES)}
    cache = _cache(labels)
    specs = [
        {"nodeSelector": {"zone": f"z{i % 5}", "pool": f"p{i % 4}"}}
        for i in range(MAX_SELECTIONS + 4)
    ]
    for _ in range(3):
        for spec in specs:
            assert _nodes(cache, spec) == _expected(cache, labels, spec)
    assert len(cache._selections) == MAX_SELECTIONS


def test_a_shape_every_node_meets_answers_from_the_whole_fleet_until_one_does_not() -> None:
    labels = {n: {"zone": "a"} for n in NAMES}
    cache = _cache(labels)
    spec: dict[str, Any] = {"nodeSelector": {"zone": "a"}}
    assert cache.fleet_for(pod(**spec)) is cache.groups()  # its views are the plain pods'
    cache.node_exists("n3", True, {"zone": "b"})
    narrowed = cache.fleet_for(pod(**spec))
    assert narrowed is not cache.groups()
    assert _nodes(cache, spec) == set(NAMES) - {"n3"}


def test_the_index_follows_label_changes_and_drops_sets_no_node_has() -> None:
    store = LabelStore()
    store.put("a", {"zone": "x", HOSTNAME: "host-a"})
    store.put("b", {"zone": "x", HOSTNAME: "host-b"})
    assert store.tags == 1 and store.postings("zone") == {"x": {store.nodes["a"].tag}}
    store.put("b", {"zone": "y", HOSTNAME: "host-a"})  # moves, and now shares a hostname
    assert set(store.postings("zone")) == {"x", "y"}
    assert store.by_hostname("host-a") == {"a", "b"} and store.by_hostname("host-b") == set()
    store.put("a", None)
    assert store.postings("zone") == {"y": {store.nodes["b"].tag}} and store.tags == 1
    assert store.by_hostname("host-a") == {"b"}
    store.put("c", {HOSTNAME: "c"})  # a hostname that is the node's own name
    assert store.by_hostname("c") == {"c"} and store.postings("pool") == {}


FIXED = {  # every kind of node a single expression can tell apart; n9 has no labels known
    "n0": {"zone": "a", "rank": "5", HOSTNAME: "n0"},
    "n1": {"zone": "b", "rank": "-3", HOSTNAME: "n2"},
    "n2": {"zone": "", "rank": "x y", HOSTNAME: "n2"},
    "n3": {"pool": "a", "rank": "10", "metadata.name": "n1"},
    "n4": {"rank": "1", HOSTNAME: "5"},
    "n5": {},
    "n6": {"zone": "a", "rank": "5", HOSTNAME: "n6"},
    "n7": {"zone": "a", "pool": "b", HOSTNAME: "-3"},
    "n8": {"metadata.name": "n8", HOSTNAME: ""},
}
VALUE_LISTS = [
    None,
    [],
    ["a"],
    ["a", "b"],
    [""],
    ["5"],
    ["-3"],
    ["1", "10"],
    ["n2"],
    ["n1", "5"],
    ["1", 2],
]


def test_every_single_expression_and_field_decides_as_the_scheduler() -> None:
    cache = _cache(FIXED)
    store = LabelStore()
    for name, own in FIXED.items():
        store.put(name, own)
    checked = 0
    for key in KEYS:
        for op in OPS:
            for vals in VALUE_LISTS:
                e = {"key": key, "operator": op, "values": vals}
                for t in ({"matchExpressions": [e]}, {"matchFields": [e]}):
                    got = Shape(store, None, [t]).admitted(cache.groups().members())
                    want = _expected(cache, FIXED, _spec(None, [t]))
                    assert (
                        set(cache.nodes) if got is None else {n for _, ns in got for n in ns}
                    ) == want, t
                    checked += 1
    assert checked == len(KEYS) * len(OPS) * len(VALUE_LISTS) * 2
