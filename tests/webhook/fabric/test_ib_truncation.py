"""A dump cut short (a full disk, a copy-paste, a ConfigMap edit that lost its end) is refused,
naming the line, instead of silently dropping the cut leaves' nodes and shifting the pairs and
quads after them (issue 17). ibnetdiscover prints a block for every node it found and every cable
from both ends, so a cut shows as a cable whose far end is missing."""

from __future__ import annotations

import re

import pytest

from tests.fakes.fabric_dump import FatTree
from tests.webhook.fabric.helpers import hca, ref, status
from webhook.fabric.controller import CONDITION, FabricController
from webhook.fabric.levels import LEAF_PAIR, Positions
from webhook.fabric.model import SourceError
from webhook.fabric.sources import join
from webhook.fabric.sources.formats import derive
from webhook.fabric.sources.ib import reader

PSMN = ref("ibnetdiscover/psmn-x5.topofile")
GUIDS = join.parse_map(ref("ibnetdiscover/psmn-x5.map"))
_CUT = re.compile(r"^line \d+: S-[0-9a-f]{16}.* the dump is cut short")


def _cut(text: str, keep: int) -> str:
    return "\n".join(text.splitlines()[:keep]) + "\n"


def test_a_cut_at_any_line_of_a_real_dump_is_refused_naming_a_line() -> None:
    lines = PSMN.splitlines()
    first_block = next(i for i, line in enumerate(lines) if line.startswith("Switch"))
    last = max(i for i, line in enumerate(lines) if line.strip()) + 1
    for keep in range(first_block + 1, last):
        with pytest.raises(SourceError, match=_CUT) as err:
            reader.parse(_cut(PSMN, keep))
        assert err.value.line is not None and err.value.line <= keep
    reader.parse(_cut(PSMN, last))  # the whole dump


def test_the_named_line_is_the_cable_whose_far_end_is_missing() -> None:
    lines = PSMN.splitlines()
    keep = lines.index("", lines.index(next(x for x in lines if x.startswith("Switch")))) + 1
    with pytest.raises(SourceError) as err:  # cut after the first switch block
        reader.parse(_cut(PSMN, keep))
    assert err.value.line is not None
    peer = re.search(r'"([SH]-[0-9a-f]{16})"', lines[err.value.line - 1])
    assert peer is not None and f"{peer.group(1)} has no block" in str(err.value)
    assert f"the dump is cut short (it ends at line {keep})" in str(err.value)


def test_a_dump_cut_after_its_last_switch_block_is_refused() -> None:
    # Before issue 17 this cut derived: the last switch's 6 nodes lost their labels, and 47 of
    # the other 80 moved to another leaf pair or quad (the leaves after it shift).
    lines = PSMN.splitlines()
    keep = max(i for i, line in enumerate(lines) if line.startswith("Switch"))
    whole = Positions(derive(PSMN, "ibnetdiscover", GUIDS))
    assert len(whole.placed) > 0
    with pytest.raises(SourceError, match="cut short"):
        derive(_cut(PSMN, keep), "ibnetdiscover", GUIDS)


def test_a_last_block_without_its_ports_is_refused() -> None:
    lines = PSMN.splitlines()
    header = max(i for i, line in enumerate(lines) if line.startswith(("Switch", "Ca")))
    with pytest.raises(SourceError, match="does not list port"):
        reader.parse(_cut(PSMN, header + 1))


def test_ports_past_the_declared_count_or_twice_are_refused() -> None:
    one = ref("ibnetdiscover/jabl-2-ibm-one-switch.topo")
    declared = re.search(r"^Switch\s+(\d+)", one, re.MULTILINE)
    assert declared is not None
    past = re.sub(r"^Switch\s+\d+", "Switch\t1", one, flags=re.MULTILINE)
    with pytest.raises(SourceError, match=r"port \[\d+\] is past the 1 ports"):
        reader.parse(past)
    first_port = next(line for line in one.splitlines() if line.startswith("["))
    with pytest.raises(SourceError, match=r"lists port \[\d+\] twice"):
        reader.parse(one.replace(first_port, f"{first_port}\n{first_port}", 1))


def test_a_ports_format_line_cut_before_its_far_end_is_refused() -> None:
    text = ref("ibnetdiscover/ports-p-format-treydock-test.out")
    first = text.splitlines()[0]
    cut = first[: first.index(" - ") + 9]  # "CA ... 4x EDR - SW  1719"
    with pytest.raises(SourceError, match=r"^line 1: port line cut short"):
        reader.parse(text.replace(first, cut))


def test_controller_keeps_the_last_good_labels_when_the_dump_is_cut() -> None:
    c = FabricController(now=lambda: "2026-11-25T17:00:00Z")
    # Each mapped host's agent status: its HCAs' node GUIDs (the map's join key).
    c.statuses(
        [
            (node, status(*(hca(f"mlx4_{i}", g) for i, g in enumerate(sorted(guids)))))
            for node, guids in GUIDS.items()
        ]
    )
    c.configmap({"ibnetdiscover": PSMN})
    assert c.refresh()[0]
    before = {n: dict(c.labels_for_node(n)) for n in GUIDS if c.labels_for_node(n)}
    assert before and all(LEAF_PAIR in labels for labels in before.values())
    lines = PSMN.splitlines()
    keep = max(i for i, line in enumerate(lines) if line.startswith("Switch"))
    c.configmap({"ibnetdiscover": _cut(PSMN, keep)})
    changed, body = c.refresh()
    assert not changed and body is not None
    assert {n: dict(c.labels_for_node(n)) for n in before} == before
    cond = body["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == (CONDITION, "False", "BadInput")
    assert re.search(r"key ibnetdiscover: line \d+: .* cut short", cond["message"])
    c.configmap({"ibnetdiscover": PSMN})  # the whole dump again: valid, same labels
    assert c.refresh()[0] is False and c.body()["status"]["conditions"][0]["status"] == "True"


def test_switches_with_thousands_of_ports_are_read_whole() -> None:
    # The synthetic 65,536-node tree's core switches have 8,192 ports: cable ends must not collide
    # (they once did past 4,095 ports, reading that whole dump as cut short).
    # One leaf with 4,200 hosts: with a 12-bit port field its port 4,161 was the spine's port 65.
    tree = FatTree(1, 4200, rails=1, spines=1)
    text, statuses = tree.render()
    fabric = derive(text, "ibnetdiscover", join.from_statuses(statuses.items()))
    assert len(Positions(fabric).placed) == 4200
    assert fabric.tiers == (1, 1)


def test_a_second_block_and_a_cable_not_listed_back_name_both_lines() -> None:
    lines = PSMN.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("Ca")) + 1
    again = "\n".join([*lines, "", lines[first - 1], lines[first]]) + "\n"
    with pytest.raises(
        SourceError, match=rf"second block for H-[0-9a-f]+ \(first at line {first}\)"
    ):
        reader.parse(again)
    # The CA's port line names another port of its switch: the switch's own line for the cable
    # finds the CA's block (named by its line) not listing it back.
    port = lines[first]
    moved = re.sub(r'"\[(\d+)\]', lambda m: f'"[{int(m.group(1)) + 30}]', port, count=1)
    with pytest.raises(SourceError, match=rf"'s block \(line {first}\) does not list port \[1\]"):
        reader.parse(PSMN.replace(port, moved))
