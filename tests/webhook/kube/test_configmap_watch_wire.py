"""The topology ConfigMaps through the real kubernetes client against a fake API that answers as
kube-apiserver does (tests/fakes/configmaps.py): the named and the labelled watch, list pages,
binaryData as base64, and the labeler's fabric fed from them as `serve` wires it."""

from __future__ import annotations

import copy
from typing import Any

from tests.fakes.configmaps import ConfigMapApi, serving
from tests.fakes.fabric_dump import FatTree
from webhook.fabric.controller import CONDITION, FabricController
from webhook.fabric.sources.parts import CONFIGMAP, PART_LABEL
from webhook.fabric.sources.split import configmaps, split
from webhook.kube.client import configmap_list_watch

NS = "gpufabric-system"


def feed(fabric: FabricController, api_client: Any) -> dict[str, tuple[Any, Any, str]]:
    """List both watches into the fabric, as add_network's ListWatches do; name -> (lister,
    watcher, resourceVersion)."""
    out = {}
    for watch, selector in (
        ("topology-configmap", {"name": CONFIGMAP}),
        ("topology-parts", {"label": PART_LABEL}),
    ):
        lister, watcher = configmap_list_watch(api_client, NS, **selector)
        pages = list(lister())  # the lister hands over one page at a time
        items = [o for page in pages for o in page.items]
        version = pages[-1].version
        fabric.configmaps(watch, items)
        out[watch] = (lister, watcher, version)
    return out


def follow(fabric: FabricController, watches: dict[str, tuple[Any, Any, str]]) -> None:
    """Each watch from where it left off, its events into the fabric."""
    for watch, (lister, watcher, version) in watches.items():
        for event in watcher(version):
            fabric.configmap_event(watch, event["type"], event["object"])
            version = event["object"]["metadata"]["resourceVersion"]
        watches[watch] = (lister, watcher, version)


def test_parts_listed_in_pages_and_watched_give_the_labels_and_name_a_cut_part() -> None:
    tree = FatTree(8, 8, rails=8, spines=4)
    text, statuses = tree.render()
    parts = list(configmaps(split([text.encode()], "ibnetdiscover", 4096), NS))
    assert len(parts) > 8  # more than one list page
    api = ConfigMapApi(NS)
    api.put({"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "x"}})
    for p in parts:
        api.put(p)
    with serving(api) as api_client:
        fabric = FabricController(now=lambda: "2026-11-26T12:00:00Z")
        fabric.statuses(list(statuses.items()))
        watches = feed(fabric, api_client)
        listed = [q for q in api.requests if "watch" not in q]
        assert {q.get("labelSelector", [""])[0] for q in listed} == {"", PART_LABEL}
        assert any("continue" in q for q in listed) and all(q["limit"] == ["8"] for q in listed)
        assert fabric.refresh()[0]
        assert all(fabric.labels_for_node(n) for n in tree.node_names())
        before = {n: dict(fabric.labels_for_node(n)) for n in tree.node_names()}

        # Part 3 replaced by a copy cut short: the watch event names it; the labels stay.
        cut = copy.deepcopy(parts[3])
        value = cut["binaryData"]["ibnetdiscover.gz"]
        cut["binaryData"]["ibnetdiscover.gz"] = value[: len(value) // 2 // 4 * 4]
        api.put(cut)
        follow(fabric, watches)
        assert not fabric.refresh()[0]
        cond = fabric.body()["status"]["conditions"][0]
        assert (cond["type"], cond["status"]) == (CONDITION, "False")
        assert "part 3 (ConfigMap gpufabric-topology-3): gzip data cut short" in cond["message"]
        assert {n: dict(fabric.labels_for_node(n)) for n in tree.node_names()} == before

        # Its label removed: the label watch says DELETED, and part 3 is missing.
        unlabelled = copy.deepcopy(parts[3])
        del unlabelled["metadata"]["labels"]
        api.put(unlabelled)
        follow(fabric, watches)
        fabric.refresh()
        assert "part 3 of " in fabric.body()["status"]["conditions"][0]["message"]

        # Part 0 loses its label too: the named watch still has it, as part 0.
        api.put(parts[3])
        first = copy.deepcopy(parts[0])
        del first["metadata"]["labels"]
        api.put(first)
        follow(fabric, watches)
        fabric.refresh()
        assert fabric.body()["status"]["conditions"][0]["status"] == "True"
        assert {n: dict(fabric.labels_for_node(n)) for n in tree.node_names()} == before
