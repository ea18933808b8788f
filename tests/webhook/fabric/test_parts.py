"""A topology source over several ConfigMaps (issue 22): gzip in binaryData, parts in index order,
the same labels as from the raw dump, and a missing, cut or garbled part named in `SourceValid`
while the last good labels stay."""

from __future__ import annotations

import base64
import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.fabric_dump import FatTree
from tests.webhook.fabric.helpers import REF
from webhook.fabric.controller import CONDITION, FabricController
from webhook.fabric.levels import Positions
from webhook.fabric.sources import parts
from webhook.fabric.sources.formats import derive, detect
from webhook.fabric.sources.split import configmaps, split

SMALL = 8 * 1024  # a budget that cuts the small real dumps into several parts


def cut(text: str, key: str, budget: int = SMALL) -> list[dict[str, Any]]:
    """The ConfigMaps `-o configmaps` makes, as the API gives them back (JSON)."""
    data = text.encode()
    blocks = [data[i : i + 1000] for i in range(0, len(data), 1000)]
    return json.loads(json.dumps(list(configmaps(split(blocks, key, budget), "gpufabric-system"))))


def read(items: list[dict[str, Any]]) -> str:
    source = parts.assemble(p for o in items if (p := parts.part_of(o)))
    assert source is not None
    return parts.text(source)


def stream(items: list[dict[str, Any]]) -> Any:
    """The labeler's way: the parts decoded as the parse reads them (parts.text_chunks)."""
    source = parts.assemble(p for o in items if (p := parts.part_of(o)))
    assert source is not None
    return parts.text_chunks(source)


def labels(text: Any, key: str) -> dict[str, dict[str, str]] | str:
    """Each placed node's labels, or the error the source gets."""
    try:
        pos = Positions(derive(text, key))
    except parts.SourceError as err:
        return str(err)
    return {n: dict(pos.labels_for_node(n)) for n in pos.placed}


DUMPS = sorted(
    p
    for folder in ("ibnetdiscover", "slurm", "static")
    for p in (REF / folder).glob("*")
    if p.suffix not in (".md", ".map", ".spine", ".csv")
)


@pytest.mark.parametrize("path", DUMPS, ids=lambda p: p.name)
def test_real_sources_read_back_from_parts_give_the_same_labels(path: Path) -> None:
    text = path.read_text()
    key = _key(text, path)
    want = labels(text, key)
    for budget in (SMALL, 960 * 1024):
        items = cut(text, key, budget)
        assert read(items) == text
        assert labels(read(items), key) == want  # the same labels, or the same refusal
        assert labels(stream(items), key) == want  # streamed: the same, line numbers included
        if len(text) > SMALL and budget == SMALL:
            assert all("binaryData" in o for o in items)
            assert len(items) >= len(gzip.compress(text.encode())) // SMALL


def _key(text: str, path: Path) -> str:
    return detect(text, path.name)


def gz_parts(n: int = 4, per_su: int = 4) -> tuple[list[dict[str, Any]], FatTree, str]:
    tree = FatTree(n, per_su, rails=8, spines=4)
    text, _ = tree.render()
    items = cut(text, "ibnetdiscover", 2048)
    assert len(items) >= 4 and all("binaryData" in o for o in items)
    return items, tree, text


def controller(items: list[dict[str, Any]], tree: FatTree) -> FabricController:
    c = FabricController(now=lambda: "2026-11-26T12:00:00Z")
    c.statuses(list(tree.render()[1].items()))
    c.configmaps("topology-parts", items)
    return c


def condition(c: FabricController) -> dict[str, str]:
    cond = c.body()["status"]["conditions"][0]
    assert cond["type"] == CONDITION
    return dict(cond)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def raw(item: dict[str, Any]) -> bytes:
    return base64.b64decode(item["binaryData"]["ibnetdiscover.gz"])


def set_raw(item: dict[str, Any], data: bytes) -> None:
    item["binaryData"]["ibnetdiscover.gz"] = b64(data)


def _missing(items: list[dict[str, Any]]) -> None:
    del items[2]


def _truncated(items: list[dict[str, Any]]) -> None:
    set_raw(items[2], raw(items[2])[:-100])


def _crc(items: list[dict[str, Any]]) -> None:
    data = bytearray(raw(items[2]))
    data[-6] ^= 0xFF  # the member's CRC-32 in its trailer
    set_raw(items[2], bytes(data))


def _garbage(items: list[dict[str, Any]]) -> None:
    items[2]["binaryData"]["ibnetdiscover.gz"] = "not base64 at all!"


def _not_gzip(items: list[dict[str, Any]]) -> None:
    set_raw(items[2], b"plain bytes, no gzip header" * 10)


def _index_twice(items: list[dict[str, Any]]) -> None:
    items[3]["metadata"]["labels"][parts.PART_LABEL] = "2"


def _not_an_index(items: list[dict[str, Any]]) -> None:
    items[2]["metadata"]["labels"][parts.PART_LABEL] = "two"


def _mixed(items: list[dict[str, Any]]) -> None:
    items[2]["metadata"]["annotations"][parts.SHA256_ANNOTATION] = "0" * 64


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (_missing, "part 2 of "),
        (_truncated, "part 2 (ConfigMap gpufabric-topology-2): gzip data cut short"),
        (_crc, "part 2 (ConfigMap gpufabric-topology-2): damaged gzip data"),
        (_garbage, "part 2 (ConfigMap gpufabric-topology-2): ibnetdiscover.gz is not base64"),
        (_not_gzip, "part 2 (ConfigMap gpufabric-topology-2): damaged gzip data"),
        (_index_twice, "part 2 is given twice: ConfigMaps gpufabric-topology-2 and "),
        (_not_an_index, "ConfigMap gpufabric-topology-2: label gpufabric.io/topology-part=two"),
        (_mixed, "part 2 (ConfigMap gpufabric-topology-2) and part 0 (ConfigMap "),
    ],
    ids=lambda v: getattr(v, "__name__", "")[1:],
)
def test_a_bad_part_is_named_and_the_last_good_labels_stay(spoil: Any, message: str) -> None:
    items, tree, _ = gz_parts()
    c = controller(items, tree)
    assert c.refresh()[0] and condition(c)["status"] == "True"
    before = {n: dict(c.labels_for_node(n)) for n in tree.node_names()}
    assert all(before.values())
    bad = copy.deepcopy(items)
    spoil(bad)
    c.configmaps("topology-parts", bad)
    changed, _ = c.refresh()
    assert not changed
    assert {n: dict(c.labels_for_node(n)) for n in tree.node_names()} == before
    cond = condition(c)
    assert (cond["status"], cond["reason"]) == ("False", "BadInput")
    assert message in cond["message"], cond["message"]
    c.configmaps("topology-parts", items)  # every part good again
    assert not c.refresh()[0] and condition(c)["status"] == "True"


def test_a_part_cut_before_its_member_ends_is_named_not_the_next_one() -> None:
    items, tree, _ = gz_parts()
    set_raw(items[1], raw(items[1])[: len(raw(items[1])) // 2])
    c = controller(items, tree)
    c.refresh()
    assert (
        "part 1 (ConfigMap gpufabric-topology-1): gzip data cut short" in (condition(c)["message"])
    )


def test_the_parts_are_read_in_index_order_not_name_order() -> None:
    items, tree, text = gz_parts(8)
    assert len(items) > 10  # gpufabric-topology-10 sorts before -2 by name
    c = controller(list(reversed(items)), tree)
    assert c.refresh()[0] and condition(c)["status"] == "True"
    assert read(list(reversed(items))) == text


def test_a_gzip_file_cut_with_split_b_reads_as_one_stream() -> None:
    # By hand: `gzip dump; split -b`, each piece a ConfigMap labelled with its index.
    _, tree, text = gz_parts()
    data = gzip.compress(text.encode())
    pieces = [data[i : i + 3000] for i in range(0, len(data), 3000)]
    items = [
        {
            "metadata": {"name": f"dump-{i}", "labels": {parts.PART_LABEL: str(i)}},
            "binaryData": {"ibnetdiscover.gz": b64(piece)},
        }
        for i, piece in enumerate(pieces)
    ]
    assert read(items) == text
    c = controller(items, tree)
    assert c.refresh()[0] and all(c.labels_for_node(n) for n in tree.node_names())


def test_leftover_parts_of_a_longer_source_are_ignored() -> None:
    items, tree, text = gz_parts()
    shorter = cut(text, "ibnetdiscover", 4096)
    assert len(shorter) < len(items)
    # The new parts applied over the old ones; the old last parts stay behind.
    mixed = shorter + items[len(shorter) :]
    assert read(mixed) == text
    c = controller(mixed, tree)
    assert c.refresh()[0] and condition(c)["status"] == "True"


def test_a_half_applied_update_waits_for_every_part() -> None:
    items, tree, text = gz_parts()
    c = controller(items, tree)
    c.refresh()
    new = cut(text.replace("su1-n1 ", "su1-n9 "), "ibnetdiscover", 2048)
    c.configmaps("topology-parts", [new[0], *items[1:]])
    assert not c.refresh()[0] and "come from different sources" in condition(c)["message"]
    c.configmaps("topology-parts", new)
    assert condition(c)["status"] == "False"  # not yet refreshed
    c.refresh()
    assert condition(c)["status"] == "True"


def test_the_named_configmap_alone_is_part_zero_and_both_watches_merge() -> None:
    items, tree, _ = gz_parts()
    first = copy.deepcopy(items[0])
    del first["metadata"]["labels"]  # gpufabric-topology, unlabelled: part 0 by its name
    c = controller(items[1:], tree)
    c.refresh()
    assert "part 0 missing" in condition(c)["message"]
    c.configmaps("topology-configmap", [first])
    assert c.refresh()[0] and condition(c)["status"] == "True"
    # Labelled too: both watches have it; the label watch losing it keeps it as part 0.
    c.configmaps("topology-parts", items)
    c.configmap_event("topology-parts", "DELETED", items[0])
    c.refresh()
    assert condition(c)["status"] == "True"
    c.configmap_event("topology-configmap", "DELETED", first)
    c.refresh()
    assert "part 0 missing" in condition(c)["message"]


def test_a_source_over_the_content_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    items, tree, text = gz_parts()
    monkeypatch.setattr(parts, "MAX_CONTENT", len(text) - 1)
    c = controller(items, tree)
    c.refresh()
    assert "MiB of content" in condition(c)["message"]


def test_plain_text_parts_and_their_digest() -> None:
    text = "SwitchName=s0 Nodes=a[1-2]\nSwitchName=s1 Nodes=b1\nSwitchName=top Switches=s[0-1]\n"
    items = cut(text, "topology.conf", 48)  # too big for one plain part: gzip parts
    assert all("binaryData" in o for o in items)
    whole = cut(text, "topology.conf")
    assert [o["data"] for o in whole] == [{"topology.conf": text}]
    whole[0]["data"]["topology.conf"] = text.replace("b1", "b2")  # edited by hand, digest kept
    with pytest.raises(parts.PartError, match=r"does not match gpufabric\.io/topology-sha256"):
        read(whole)


def test_streamed_text_splits_only_at_line_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoded a few bytes at a time, a character split between pieces and a CRLF still read
    back whole, and every piece the parse gets ends at a line end."""
    text = "".join(f'Switch 2 "S-{i:016x}" # "lèaf {i}"\r\n[1] "H-1"[1]\n' for i in range(40))
    items = cut(text, "ibnetdiscover", 1000)  # gzip parts
    assert all("binaryData" in o for o in items)
    monkeypatch.setattr(parts, "_CHUNK", 7)
    pieces = list(stream(items)())
    assert "".join(pieces) == text
    assert all(p.endswith("\n") for p in pieces) and len(pieces) > 10


def test_streamed_text_that_is_not_utf8_names_the_source() -> None:
    items = cut('Switch 2 "S-1"\n', "ibnetdiscover")
    items[0]["data"]["ibnetdiscover"] = "x"  # a str: not reachable through the API as bad bytes
    bad = base64.b64encode(gzip.compress(b"ok\n\xff\xfe\n")).decode()
    items[0].pop("data")
    items[0]["binaryData"] = {"ibnetdiscover.gz": bad}
    with pytest.raises(parts.PartError, match="not UTF-8 text"):
        list(stream(items)())
