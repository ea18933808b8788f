"""The in-cluster fabric: ConfigMap and status changes, bad edits, stable ids, publishing."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.fakes.fabric_dump import FatTree
from tests.webhook.fabric.helpers import ref
from webhook.fabric.controller import CONDITION, FabricController, run
from webhook.fabric.levels import LEAF, SPINE
from webhook.fabric.sources import formats, join

CONF = "SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=b1\nSwitchName=top Switches=s[0-1]\n"


def _cond(c: FabricController) -> dict[str, str]:
    return c.body()["status"]["conditions"][0]


def test_bad_edit_keeps_labels_and_says_which_line() -> None:
    c = FabricController(now=lambda: "2026-11-22T16:00:00Z")
    c.configmap({"topology.conf": CONF})
    changed, body = c.refresh()
    assert changed and body is not None
    assert c.labels_for_node("a1") == {
        "gpufabric.io/spine": "top",
        "gpufabric.io/leaf-quad": "s0",
        "gpufabric.io/leaf-pair": "s0",
        "gpufabric.io/leaf": "s0",
    }
    assert body["status"]["summary"]["nodes"] == 3 and _cond(c)["status"] == "True"
    c.configmap({"topology.conf": CONF + "SwitchName=s2 Nodes=c[1-\n"})
    changed, body = c.refresh()
    assert not changed and body is not None
    assert c.labels_for_node("a1")[LEAF] == "s0"  # previous labels stay
    cond = _cond(c)
    assert cond["status"] == "False" and cond["reason"] == "BadInput"
    assert "key topology.conf: line 4: " in cond["message"]
    assert body["status"]["summary"]["nodes"] == 3  # the last good fabric stays visible
    c.configmap({"topology.conf": CONF})
    assert c.refresh()[0] is False and _cond(c)["status"] == "True"


def test_configmap_removed_means_no_network_labels() -> None:
    c = FabricController()
    c.configmap({"topology.conf": CONF})
    c.refresh()
    c.configmap(None)
    changed, _ = c.refresh()
    assert changed and c.labels_for_node("a1") == {}
    assert _cond(c)["reason"] == "NoSource"


def test_two_topology_keys_are_bad_input() -> None:
    c = FabricController()
    c.configmap({"topology.conf": CONF, "nodes.yaml": "leaves: []"})
    c.refresh()
    assert _cond(c)["status"] == "False" and "more than one topology key" in _cond(c)["message"]


def test_status_events_rederive_only_when_guids_change_and_ids_are_stable() -> None:
    text, statuses = FatTree(4, 3, rails=4).render()
    c = FabricController()
    c.configmap({"ibnetdiscover": text})
    c.statuses([(n, s) for n, s in statuses.items() if n != "su2-n3"])
    assert c.refresh()[0]
    before = {n: dict(c.labels_for_node(n)) for n in statuses if n != "su2-n3"}
    assert c.labels_for_node("su2-n3") == {}
    # Same GUIDs again (an agent rewrote its status for another reason): nothing to do.
    c.status("su1-n1", statuses["su1-n1"])
    assert c.refresh() == (False, None)
    c.status("su2-n3", statuses["su2-n3"])  # a node joins
    changed, _ = c.refresh()
    assert changed
    assert c.labels_for_node("su2-n3")[LEAF] == c.labels_for_node("su2-n1")[LEAF]
    assert all(c.labels_for_node(n) == labels for n, labels in before.items())


def test_a_guid_change_places_the_parsed_dump_again_without_reading_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text, statuses = FatTree(4, 3, rails=4).render()
    reads: list[object] = []
    real = formats.reader.parse
    monkeypatch.setattr(formats.reader, "parse", lambda t, *a: reads.append(t) or real(t, *a))
    c = FabricController()
    c.configmap({"ibnetdiscover": text})
    c.statuses([(n, s) for n, s in statuses.items() if n != "su2-n3"])
    assert c.refresh()[0] and len(reads) == 1
    c.status("su2-n3", statuses["su2-n3"])  # a node joins: its GUIDs, the same dump
    assert c.refresh()[0] and len(reads) == 1
    # As if derived from scratch with every status.
    fresh = formats.place(real(text), join.from_statuses(statuses.items()))
    assert c.positions().fabric == fresh
    c.status("su2-n3", None)  # and leaves again
    assert c.refresh()[0] and len(reads) == 1 and c.labels_for_node("su2-n3") == {}
    # A new dump (one more line of tool output before the header) is read again.
    c.configmap({"ibnetdiscover": "ibwarn: noise\n" + text})
    c.refresh()
    assert len(reads) == 2 and _cond(c)["status"] == "True"
    c.configmap({"ibnetdiscover": "ibwarn: noise\n" + text})  # the same again: not read
    c.refresh()
    assert len(reads) == 2


def test_preset_reads_node_labels_and_ignores_our_own() -> None:
    c = FabricController("aws")
    layer = "topology.k8s.aws/network-node-layer-"
    c.node("n1", {f"{layer}1": "nn-a", f"{layer}2": "nn-b", f"{layer}3": "nn-c", "team": "x"})
    assert c.refresh()[0] and c.labels_for_node("n1")[SPINE] == "nn-b"
    c.node(
        "n1",
        {
            f"{layer}1": "nn-a",
            f"{layer}2": "nn-b",
            f"{layer}3": "nn-c",
            "gpufabric.io/leaf": "nn-c",
        },
    )
    assert c.refresh() == (False, None)


def test_run_relabels_on_change_and_retries_a_failed_publish() -> None:
    c = FabricController()
    c.configmap({"topology.yaml": ref("slurm/slurm-topology.yaml.5-example.yaml")})
    stop = threading.Event()
    resyncs: list[int] = []
    published: list[dict[str, Any]] = []
    calls = [0]

    def publish(body: dict[str, Any]) -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise ConnectionError("apiserver down")
        published.append(body)
        stop.set()

    run(c, stop, lambda: resyncs.append(1), publish, period=0.01)
    assert resyncs == [1] and len(published) == 1 and calls[0] == 2
    assert published[0]["metadata"]["name"] == "cluster"
    assert published[0]["status"]["conditions"][0]["type"] == CONDITION


def test_bad_preset_is_a_condition_not_a_crash() -> None:
    c = FabricController("azure")
    c.node("n1", {"x": "y"})
    c.refresh()
    assert _cond(c)["status"] == "False" and "--topology-labels" in _cond(c)["message"]


def test_a_dump_read_line_by_line_is_counted_once_per_source() -> None:
    text, statuses = FatTree(2, 3, rails=2).render()
    seen: list[str] = []
    c = FabricController(on_fallback=seen.append)
    c.configmap({"ibnetdiscover": text})
    c.statuses(list(statuses.items()))
    c.refresh()
    assert seen == []  # ibnetdiscover's own layout: read column-wise
    spaced = text.replace("\t", "  ")  # the same dump off the exact layout
    c.configmap({"ibnetdiscover": spaced})
    c.refresh()
    c.status(next(iter(statuses)), None)  # GUIDs change: the kept parse is placed again
    c.refresh()
    assert seen == ["declined"] and _cond(c)["status"] == "True"
