"""The fleet's running totals stay equal to a recount after any sequence of watch events."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from common.wire import to_wire
from tests.webhook.admission.test_placement_properties import summaries
from webhook.admission.placement import query_of
from webhook.fleet.cache import FabricCache
from webhook.fleet.layouts import Fleet, Query, _worst, query_holds

NAMES = [f"n{i}" for i in range(6)]
QUERIES: list[Query] = [
    ((),),
    ((("gpufabric.io/rdma", "In", ("true",)),),),
    (
        (("gpufabric.io/rdma-ports", "Gt", ("2",)),),
        (("gpufabric.io/cufile", "In", ("true",)), ("gpufabric.io/gpu-count", "Gt", ("3",))),
    ),
]

EVENTS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(NAMES), summaries()),
        st.tuples(st.just("delete"), st.sampled_from(NAMES), st.none()),
        st.tuples(st.just("exists"), st.sampled_from(NAMES), st.booleans()),
        st.tuples(st.just("existing"), st.sets(st.sampled_from(NAMES)), st.none()),
        st.tuples(st.just("relist"), st.sets(st.sampled_from(NAMES)), summaries()),
    ),
    max_size=25,
)


def _recount(cache: FabricCache, query: Query) -> tuple[int, set[str], str]:
    """The answer by brute force over the cache's node records."""
    recs = [r for r in cache.nodes.values() if query_holds(query, r.layout.values)]
    common = set.intersection(*(set(r.usable_hcas) for r in recs)) if recs else set()
    return len(recs), common, _worst(r.gdr_level for r in recs if r.gdr_level)


@settings(max_examples=200, deadline=None)
@given(events=EVENTS)
def test_totals_match_a_recount(events: list[tuple[str, Any, Any]]) -> None:
    cache = FabricCache()
    fleet = cache.groups()
    for q in QUERIES[1:]:
        fleet.candidates(q)  # views exist before the events, so they are kept current
    for kind, who, what in events:
        if kind == "put":
            cache.put_node(who, {"summary": to_wire(what)})
        elif kind == "delete":
            cache.delete_node(who)
        elif kind == "exists":
            cache.node_exists(who, what)
        elif kind == "existing":
            cache.replace_existing_nodes(who)
        else:
            cache.replace_nodes((n, {"summary": to_wire(what)}) for n in sorted(who))
        for q in QUERIES:
            got = fleet.candidates(q)
            assert (got.nodes, set(got.common_hcas), got.gdr_level) == _recount(cache, q)
            fresh = Fleet.of_groups(fleet.groups()).candidates(q)
            assert fresh == got
    assert {n for g in fleet.groups() for n in g.nodes} == set(cache.nodes)


def test_alike_pods_ask_the_same_question() -> None:
    """Order, duplicates and keys we cannot judge do not make a new query."""
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
    rdma = {"key": "gpufabric.io/rdma", "operator": "In", "values": ["true"]}
    ports = {"key": "gpufabric.io/rdma-ports", "operator": "Gt", "values": ["3"]}

    def pod(*terms: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "spec": {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
                        }
                    }
                }
            }
        }

    assert query_of(pod([rdma, ports, zone])) == query_of(pod([ports, rdma], [rdma, ports]))
    assert query_of(pod([rdma], [zone])) == ((),)  # the second term admits every node
    assert query_of({"spec": {}}) == ((),)
