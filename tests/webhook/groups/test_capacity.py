"""The placer's per-domain capacity, kept current event by event, equals a recount from scratch:
after any sequence of pods created, bound, finished, deleted and promised, and nodes added,
removed, relabelled, cordoned or tainted, in any order."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.webhook.groups.fabric import gpu_pod, node
from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.tally import Tally
from webhook.groups.model.names import LEVELS, level_key
from webhook.groups.model.selector import Selector, selector_of
from webhook.groups.placer.placer import Placer

NODES = 12
SELECTORS = (
    selector_of({}),
    selector_of({"nodeSelector": {"zone": "a"}}),
    selector_of({"tolerations": [{"key": "maint", "operator": "Exists"}]}),
    selector_of(
        {
            "nodeSelector": {"zone": "b"},
            "tolerations": [{"key": "maint", "operator": "Exists"}],
        }
    ),
)


class NoApi:
    def patch_pod(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> None:
        return None

    def event(self, pod: Any, reason: str, message: str, kind: str) -> None:
        return None


def a_node(i: int, gpus: int, leaf: int, zone: str, how: str) -> dict[str, Any]:
    return node(
        i,
        leaf=leaf,
        spine_leaves=2,
        gpus=gpus,
        ready=how != "notready",
        extra={"zone": zone, **({level_key(LEVELS[0]): f"nvl-{i // 3}"} if i % 4 else {})},
        taints=[{"key": "maint", "value": "x", "effect": "NoSchedule"}] if how == "taint" else None,
        unschedulable=how == "cordon",
    )


node_ops = st.tuples(
    st.just("node"),
    st.integers(0, NODES - 1),
    st.sampled_from((0, 4, 8)),
    st.sampled_from((2, 4)),  # leaf size: changing it relabels every level above
    st.sampled_from(("a", "b")),
    st.sampled_from(("ok", "ok", "notready", "cordon", "taint", "delete")),
)
pod_ops = st.tuples(
    st.just("pod"),
    st.integers(0, 15),  # which pod (by name)
    st.integers(0, 8),  # GPUs
    st.integers(-1, NODES + 1),  # node (-1: unbound; past NODES: a node the view does not know)
    st.sampled_from(("Pending", "Running", "Running", "Succeeded", "Failed", "delete")),
)
promise_ops = st.tuples(
    st.just("promise"), st.integers(0, 5), st.integers(0, NODES - 1), st.integers(0, 8)
)
tally_ops = st.tuples(st.just("tally"), st.integers(0, len(SELECTORS) - 1))
relist_ops = st.tuples(st.sampled_from(("relist pods", "relist nodes")))
paged_ops = st.tuples(  # a relist page by page, as run_placer feeds it
    st.sampled_from(("paged pods", "paged nodes")),
    st.integers(1, 5),  # page size
    st.booleans(),  # a first try cut short (410 on continue): listed again from the start
    st.integers(-1, NODES - 1),  # a node whose DELETED event was missed (-1: none)
)


def expected(view: CapacityView, pods: dict[str, tuple[str, int]], nodes: set[str]) -> Tally:
    """The tally recounted from the nodes and pods themselves, without the view's bookkeeping."""
    taken: dict[str, int] = {}
    for node_name, gpus in pods.values():
        taken[node_name] = taken.get(node_name, 0) + gpus
    out = Tally()
    for name in nodes:
        info = view.nodes[name]
        where = tuple(info.labels.get(level_key(lv)) for lv in LEVELS)
        out.add(where, max(0, info.gpus - taken.get(name, 0)), info.gpus)
    return out


def fragmentation(view: CapacityView, level: str) -> float:
    """Share of free GPUs in domains not entirely free, walking every node."""
    domains: dict[str, list[str]] = {}
    for name, info in view.nodes.items():
        if info.labels.get(level_key(level)):
            domains.setdefault(info.labels[level_key(level)], []).append(name)
    total = whole = 0
    for nodes in domains.values():
        free = sum(view.free(n) for n in nodes)
        total += free
        if free and all(view.nodes[n].usable and view.free(n) == view.nodes[n].gpus for n in nodes):
            whole += free
    return 0.0 if total == 0 else 1.0 - whole / total


def same(a: Tally, b: Tally) -> bool:
    return (a.free, a.sums, a.alloc, a.size) == (b.free, b.sums, b.alloc, b.size)


def admitted_now(view: CapacityView, s: Selector) -> set[str]:
    return {
        n.name for n in view.nodes.values() if n.usable and s.admits(n.name, n.labels, n.taints)
    }


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(node_ops, pod_ops, promise_ops, tally_ops, relist_ops, paged_ops), max_size=60
    )
)
def test_incremental_capacity_equals_a_recount(ops: list[tuple[Any, ...]]) -> None:
    placer = Placer(NoApi())
    nodes = {f"node-{i:04d}": a_node(i, 8, 4, "ab"[i % 2], "ok") for i in range(NODES)}
    placer.nodes_listed(nodes.values())
    view = placer.view
    view.tally([SELECTORS[1]])  # a constraint set tracked from the start
    promised: dict[str, tuple[str, int]] = {}
    pod_objs: dict[str, dict[str, Any]] = {}
    for op in ops:
        if op[0] == "node":
            _, i, gpus, leaf, zone, how = op
            if how == "delete":
                nodes.pop(f"node-{i:04d}", None)
                placer.node_event("DELETED", {"metadata": {"name": f"node-{i:04d}"}})
            else:
                nodes[f"node-{i:04d}"] = a_node(i, gpus, leaf, zone, how)
                placer.node_event("MODIFIED", nodes[f"node-{i:04d}"])
        elif op[0] == "pod":
            _, k, gpus, at, phase = op
            name = f"p{k}"
            obj = gpu_pod(name, gpus, node_name=f"node-{at:04d}" if at >= 0 else "", phase=phase)
            placer.pod_event("DELETED" if phase == "delete" else "MODIFIED", obj)
            if phase == "delete":
                pod_objs.pop(name, None)
            else:
                pod_objs[name] = obj
        elif op[0] == "relist pods":  # a relist drops promises the pods do not show
            placer.pods_listed(list(pod_objs.values()))
            promised = {}
        elif op[0] == "relist nodes":
            placer.nodes_listed(list(nodes.values()))
        elif op[0] in ("paged pods", "paged nodes"):
            _, size, cut, gone = op
            if op[0] == "paged nodes":
                nodes.pop(f"node-{gone:04d}", None)  # not listed: gone at the end
                start, page, done = placer.nodes_start, placer.nodes_page, placer.nodes_done
                items = list(nodes.values())
            else:
                start, page, done = placer.pods_start, placer.pods_page, placer.pods_done
                items, promised = list(pod_objs.values()), {}
            before = (dict(view.nodes), dict(view.bound), view.generation, dict(placer.pods))
            start()
            if cut:
                page(items[:size])
                start()
            for k in range(0, len(items), size):
                page(items[k : k + size])
                # a decision between pages sees the view as it was before the list
                assert (dict(view.nodes), dict(view.bound), view.generation, placer.pods) == before
            done()
            assert set(view.nodes) == set(nodes)
        elif op[0] == "promise":
            _, k, at, gpus = op
            uid = f"promise-{k}"
            if gpus:
                view.promise(uid, f"node-{at:04d}", gpus)
                promised[uid] = (f"node-{at:04d}", gpus)
            else:
                view.release(uid)
                promised.pop(uid, None)
        else:
            view.tally([SELECTORS[op[1]]])
    # what holds GPUs: bound, non-terminal pods, plus promises not settled by a binding
    pods = dict(view.bound)
    pods |= {uid: p for uid, p in promised.items() if uid not in view.bound}
    assert view.promised == {uid: p for uid, p in promised.items() if uid not in view.bound}
    usable = {n for n, info in view.nodes.items() if info.usable}
    assert same(view.tally([]), expected(view, pods, usable))  # no constraints: every node
    for i, level in enumerate(LEVELS):
        assert view.domain_free(level) == expected(view, pods, usable).sums[i]
        assert view.free_at(level) == sum(expected(view, pods, usable).sums[i].values())
        assert view.fragmentation(level) == fragmentation(view, level)
    assert view.with_free() == {n: f for n in usable if (f := view.free(n)) > 0}
    for s in SELECTORS:
        ok = admitted_now(view, s)
        assert set(view.admitted(s)) == ok
        assert view.eligible(s) == frozenset(ok)
        assert same(view.tally([s]), expected(view, pods, ok))
    both = [SELECTORS[1], SELECTORS[3]]
    ok = admitted_now(view, both[0]) | admitted_now(view, both[1])
    assert same(view.tally(both), expected(view, pods, ok))
    # and a view built from scratch from the same nodes and pods agrees
    fresh = CapacityView()
    fresh.replace_nodes(
        [{"metadata": {"name": n}, **_node_body(view, n)} for n in sorted(view.nodes)]
    )
    for uid, (node_name, gpus) in pods.items():
        fresh.put_pod(uid, node_name, gpus, True)
    for level in LEVELS:
        assert fresh.domain_free(level) == view.domain_free(level)
    assert fresh.index() == view.index()


def _node_body(view: CapacityView, name: str) -> dict[str, Any]:
    """A Node object that node_info reads back as the view's NodeInfo."""
    info = view.nodes[name]
    ready = "False" if info.why_not.startswith("not Ready") else "True"
    return {
        "metadata": {"name": name, "labels": dict(info.labels)},
        "spec": {"taints": list(info.taints), "unschedulable": info.why_not.startswith("unsch")},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(info.gpus)},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }
