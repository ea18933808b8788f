"""ibnetdiscover dumps from shared/reference/fabric/ibnetdiscover, expectations read off the files."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.webhook.fabric.helpers import hca, ref, status, statuses_from_descriptions
from webhook.fabric.levels import LEAF, LEAF_PAIR, LEAF_QUAD, SPINE, Positions
from webhook.fabric.model import SourceError
from webhook.fabric.sources import join
from webhook.fabric.sources.formats import derive
from webhook.fabric.sources.ib import domains, reader

# (file, format, switches, CAs): counted with `grep -c '^Switch'` / `grep -c '^Ca'` on each file;
# for the -p files, distinct SW / CA GUIDs on the lines (own and peer side).
ROOT = Path(__file__).resolve().parents[3]

DUMPS = [
    ("jabl-1-manpage-2hca-ports.topo", "topology", 2, 4),
    ("jabl-2-ibm-one-switch.topo", "topology", 1, 2),
    ("jabl-3-nvidia-selfloop-errorline.topo", "topology", 2, 6),
    ("jabl-4-oracle-sun-dcs36.topo", "topology", 1, 1),
    ("psmn-x5.topofile", "topology", 11, 89),
    ("synthetic-k4-n3-fattree-3tier.topo", "topology", 80, 128),
    ("topograph-gb200-railopt-example.out", "topology", 40, 582),
    # test.out: SW 0x7cfe...e5b0, 0x7cfe...7320, 0x506b...2740, 0x08c0...d20e; CA 134, 133, 1432.
    ("ports-p-format-treydock-test.out", "ports", 4, 3),
    # test2.out: SW 0x946d...0bf6 (leaf), ...8c82, ...8c83, ...ec1a (spines), 0x0002...f160;
    # CA 0x946d...0bfe (Aggregation Node, seen from the leaf and from spine IB03), 0xb83f...1138.
    ("ports-p-format-treydock-test2.out", "ports", 5, 2),
    ("ports-p-format-treydock-test3.out", "ports", 1, 0),
]


@pytest.mark.parametrize(("name", "fmt", "switches", "cas"), DUMPS)
def test_every_dump_parses(name: str, fmt: str, switches: int, cas: int) -> None:
    dump = reader.parse(ref(f"ibnetdiscover/{name}"))
    assert dump.format == fmt
    assert sum(n.is_switch for n in dump.nodes.values()) == switches
    assert sum(not n.is_switch for n in dump.nodes.values()) == cas


def test_dump_without_a_switch_is_bad_input() -> None:
    # An unconnected GB200 tray sees only itself.
    with pytest.raises(SourceError, match="holds no switch"):
        reader.parse(ref("ibnetdiscover/topograph-single-ca-no-switch.out"))


def test_truncated_dump_names_the_line() -> None:
    text = ref("ibnetdiscover/jabl-2-ibm-one-switch.topo")
    lines = text.splitlines()
    cut = next(i for i, line in enumerate(lines) if line.startswith("[")) + 1
    lines[cut - 1] = lines[cut - 1][:7]  # a port line cut in the middle, as a full disk leaves it
    with pytest.raises(SourceError, match=rf"^line {cut}: "):
        reader.parse("\n".join(lines))


def test_noise_before_header_and_loopback_cables() -> None:
    # jabl-3: line 1 is a umad timeout message; the SwitchIB S-e41d2d030003e470 has loop-back
    # cables 1<->2, 19<->21, 29<->30 and one cable to the SX6012 (port 3).
    dump = reader.parse(ref("ibnetdiscover/jabl-3-nvidia-selfloop-errorline.topo"))
    assert dump.skipped == [1]
    sib = "S-e41d2d030003e470"
    assert (sib, sib) not in dump.links
    assert ("S-e41d2d030003e470", "S-f4521403005764b0") in dump.links
    fabric = domains.derive(dump, None)
    # Both switches hold hosts (r-ufm216/111 and r-ufm101/100...), cabled to each other: one spine
    # domain with two leaves; the managed SX6012 reads as its hostname.
    assert [[leaf.id for leaf in s.leaves] for s in fabric.spines] == [[sib, "switch-de779e"]]


def test_join_by_port_guid_in_sysfs_form() -> None:
    # jabl-1 (man page): CA H-0008f10403960558 has port 1 GUID 8f10403960559 (node GUID + 1) on
    # ISR9024 S-005442ba00003080 port 12. The status names only the port GUID, in sysfs form.
    dump = reader.parse(ref("ibnetdiscover/jabl-1-manpage-2hca-ports.topo"))
    nodes = join.from_statuses([("host-a", status(hca("mlx4_0", 0, port_guid=0x0008F10403960559)))])
    fabric = domains.derive(dump, nodes)
    assert [(leaf.id, leaf.nodes) for leaf in fabric.leaves] == [
        ("S-005442ba00003080", ("host-a",))
    ]


def test_only_compute_hcas_take_part() -> None:
    # jabl-1: H-0008f10403960984 hangs off SW-6IB4, H-0008f10403961354 off ISR9024. If the
    # SW-6IB4 one is a storage HCA (computeFabric false) it must not make SW-6IB4 a leaf.
    dump = reader.parse(ref("ibnetdiscover/jabl-1-manpage-2hca-ports.topo"))
    st = status(hca("mlx5_0", 0x0008F10403961354), hca("mlx5_1", 0x0008F10403960984, compute=False))
    fabric = domains.derive(dump, join.from_statuses([("n1", st)]))
    assert [leaf.id for leaf in fabric.leaves] == ["S-005442ba00003080"]


def test_status_without_compute_fabric_uses_active_ib_ports() -> None:
    st = status(hca("mlx5_0", 0x10, compute=None), hca("mlx5_1", 0x20, compute=None, state="DOWN"))
    assert join.status_guids(st) == frozenset({0x10})


def test_gb200_one_leaf_domain_per_rack() -> None:
    # Leaves are IBLEAF-<rail>-<rack>; every tray `<x>-dgx-<rack>-cNN` has 4 HCAs on the 4 rail
    # leaves of its rack, except rack 01 whose rail-03 leaf is missing (3 leaves) and a few trays
    # with an HCA swapped onto another rail's leaf of the same rack. 69 HCAs carry the firmware
    # default description: they stay out of the join, as they would without an agent status.
    text = ref("ibnetdiscover/topograph-gb200-railopt-example.out")
    sts = statuses_from_descriptions(text)
    trays = {h: s for h, s in sts.items() if "-dgx-" in h}
    fabric = derive(text, "ibnetdiscover", join.from_statuses(trays.items()))
    assert fabric.tiers == (31, 9)  # 31 leaves, 9 spines (IBSPINE-01..09)
    assert len(fabric.spines) == 1 and len(fabric.spines[0].switches) == 9
    leaves = fabric.spines[0].leaves
    assert len(leaves) == 8
    for rack, leaf in enumerate(leaves, 1):
        assert {re.search(r"IBLEAF-0\d-(\d\d)", s).group(1) for s in leaf.switches} == {
            f"{rack:02d}"
        }  # type: ignore[union-attr]
        assert {re.search(r"-dgx-(\d\d)-", n).group(1) for n in leaf.nodes} == {f"{rack:02d}"}  # type: ignore[union-attr]
        assert len(leaf.switches) == (3 if rack == 1 else 4)
    assert sum(len(leaf.nodes) for leaf in leaves) == len(trays)
    pos = Positions(fabric)
    a = pos.labels_for_node(leaves[0].nodes[0])  # rack 01
    b = pos.labels_for_node(leaves[1].nodes[0])  # rack 02: same pair
    c = pos.labels_for_node(leaves[2].nodes[0])  # rack 03: same quad, other pair
    e = pos.labels_for_node(leaves[4].nodes[0])  # rack 05: other quad
    assert a[LEAF] != b[LEAF] and a[LEAF_PAIR] == b[LEAF_PAIR] != c[LEAF_PAIR]
    assert a[LEAF_QUAD] == c[LEAF_QUAD] != e[LEAF_QUAD]
    assert a[SPINE] == e[SPINE] == "A10-P1-IBSPINE-01"
    assert a[LEAF] == "A09-P1-IBLEAF-01-01"  # the domain is named after its first rail leaf


def test_psmn_dump_with_guid_map_matches_the_operators_topology_conf() -> None:
    # The operator generated psmn-x5.topology.conf from the dump and the same GUID map: the leaf
    # switches (lines with Nodes=) must hold the same hosts. Unmapped CAs appear there as H-<guid>.
    nodes = join.parse_map(ref("ibnetdiscover/psmn-x5.map"))
    fabric = derive(ref("ibnetdiscover/psmn-x5.topofile"), "", nodes)
    conf = derive(ref("ibnetdiscover/psmn-x5.topology.conf"), "topology.conf")
    ours = {leaf.id: set(leaf.nodes) for leaf in fabric.leaves}
    theirs = {leaf.id: {n for n in leaf.nodes if not n.startswith("H-")} for leaf in conf.leaves}
    assert ours == theirs
    assert len(ours) == 6
    # BFS from the leaves: 6 leaves, 4 spines, and one spine hanging off two spines (notes §2).
    assert fabric.tiers == (6, 4, 1)
    assert len(fabric.spines) == 1


def test_three_tier_fat_tree() -> None:
    # k=4, n=3: Switch0-31 hold 4 Hca each, Switch32.. are the upper tiers; each group of 4 leaves
    # shares 4 level-2 switches (Switch0-3 -> Switch16-19, per the first block).
    fabric = derive(ref("ibnetdiscover/synthetic-k4-n3-fattree-3tier.topo"))
    assert fabric.tiers == (32, 32, 16)
    assert len(fabric.spines) == 8
    assert [leaf.id for leaf in fabric.spines[0].leaves] == [
        "Switch0",
        "Switch1",
        "Switch2",
        "Switch3",
    ]
    assert fabric.spines[0].switches == ("Switch16", "Switch17", "Switch18", "Switch19")
    assert all(len(leaf.nodes) == 4 for leaf in fabric.leaves)


def test_ports_format_sharp_on_spine_is_not_a_leaf() -> None:
    # test2.out: worker20 mlx5_3 sits on '5FB0405-leaf-IB01 ' (trailing space in the name); an
    # Aggregation Node sits on the same leaf and another on spine IB03.
    fabric = derive(ref("ibnetdiscover/ports-p-format-treydock-test2.out"))
    assert [(leaf.id, leaf.nodes) for leaf in fabric.leaves] == [
        ("5FB0405-leaf-IB01", ("worker20",))
    ]


def test_node_not_in_dump_is_unplaced_with_reason() -> None:
    nodes = join.from_statuses([("new-node", status(hca("mlx5_0", 0x1234))), ("no-hca", status())])
    fabric = derive(ref("ibnetdiscover/jabl-2-ibm-one-switch.topo"), "", nodes)
    reasons = {u.node: u.reason for u in fabric.unplaced}
    assert "dump generated on" in reasons["new-node"]
    assert reasons["no-hca"] == "no compute HCA GUID in the status"
    assert any(
        p.startswith(
            "1 node(s) with compute HCAs are not in the dump (generated on Wed May  6 15:14:42 2009)"
        )
        for p in fabric.problems
    )
    assert fabric.leaves == ()


def test_preview_keeps_management_hosts_on_spines_out_of_the_leaf_domains() -> None:
    # psmn-x5 with its hosts named in the dump and ten management hosts on two spine switches
    # (hack/spine_hosts_dump.py): without statuses the hosts are named from the dump, so the
    # spines hold "nodes" too; they must stay spines, as with the statuses (the GUID map).
    dump = reader.parse(ref("ibnetdiscover/psmn-x5-spine-hosts.topofile"))
    guids = join.parse_map(ref("ibnetdiscover/psmn-x5.map"))
    joined, preview = domains.derive(dump, guids), domains.derive(dump, None)
    assert preview.tiers == joined.tiers == (6, 4, 1)
    with_status, without = Positions(joined), Positions(preview)
    assert len(with_status.placed) == 86
    assert dict(without.placed) == dict(with_status.placed)  # leaves, pairs, quads, spines
    assert not any(n.startswith("mgmt") for n in without.placed)
    assert any("ignored 10 host(s) on 2 spine switch(es)" in p for p in preview.problems)
    made = subprocess.run(
        [sys.executable, "hack/spine_hosts_dump.py", "--check"], cwd=ROOT, check=False
    )
    assert made.returncode == 0  # the fixture is what the script makes


def test_a_guid_two_nodes_claim_stays_with_the_first_and_is_named() -> None:
    # jabl-2: compute-00-01 is H-0002c902002789ac, compute-00-00 H-0002c9030002847c.
    nodes = {
        "b": frozenset({0x0002C902002789AC}),
        "a": frozenset({0x0002C902002789AC, 0x0002C9030002847C}),
        "c": frozenset({0x0002C9030002847C}),
    }
    fabric = derive(ref("ibnetdiscover/jabl-2-ibm-one-switch.topo"), "", nodes)
    assert [p for p in fabric.problems if "claimed" in p] == [
        "GUID 0002c902002789ac is claimed by nodes b and a",
        "GUID 0002c9030002847c is claimed by nodes a and c",
    ]
    # Each HCA goes to its first claimant: b and a hold one each, c none.
    assert [leaf.nodes for leaf in fabric.leaves] == [("a", "b")]
    assert [u.node for u in fabric.unplaced] == ["c"]
