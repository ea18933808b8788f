"""The column-wise reader (columns.py) against the line parser (reader.py): on every dump it reads
it gives the same graph and the same fabric, and it declines (None) everything else, so a dump
the line parser refuses is never accepted, and the line parser names the line."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.fakes.fabric_dump import FatTree
from tests.webhook.fabric.helpers import ref
from webhook.fabric.levels import Positions
from webhook.fabric.model import SourceError
from webhook.fabric.sources import join
from webhook.fabric.sources.ib import cables, columns, domains, reader
from webhook.fabric.sources.ib.dump import Dump
from webhook.fabric.sources.textchunks import chunked, pieces

# Real dumps printed by ibnetdiscover itself (the others went through a man page or a web page,
# which turned tabs into spaces: the reader declines those).
PRINTED = (
    "ibnetdiscover/psmn-x5.topofile",
    "ibnetdiscover/psmn-x5-spine-hosts.topofile",
    "ibnetdiscover/topograph-gb200-railopt-example.out",
    "ibnetdiscover/topograph-single-ca-no-switch.out",
)
RETYPED = (
    "ibnetdiscover/jabl-1-manpage-2hca-ports.topo",
    "ibnetdiscover/jabl-2-ibm-one-switch.topo",
    "ibnetdiscover/jabl-4-oracle-sun-dcs36.topo",
)


def graph(dump: Dump) -> dict[str, Any]:
    """The dump by node id (the readers number nodes differently)."""
    ids = dump.ids
    return {
        "nodes": {
            ids[i]: (dump.descs[i], dump.guid(i), frozenset(dump.port_guids.get(i, ())))
            for i in range(len(ids))
        },
        "links": {ids[a]: {ids[b] for b in peers} for a, peers in dump.switch_links.items()},
        "hosts": {ids[h]: {ids[s] for s in dump.switches_of(h)} for h in dump.host_switch},
        "cables": {ids[s]: n for s, n in dump.switch_cables.items()},
        "switches": sorted(ids[i] for i in dump.switches()),
        "generated": dump.generated,
        "skipped": dump.skipped,
    }


def lines_only(text: str) -> Dump:
    return reader._parse_topology(chunked(text))


def scanned(text: str) -> Dump | None:
    return columns.scan(chunked(text))


@pytest.mark.parametrize("name", PRINTED)
def test_a_printed_dump_reads_as_the_line_parser_reads_it(name: str) -> None:
    text = ref(name)
    dump = scanned(text)
    assert dump is not None
    assert graph(dump) == graph(lines_only(text))
    assert domains.derive(dump, None) == domains.derive(lines_only(text), None)


@pytest.mark.parametrize("name", RETYPED)
def test_a_dump_with_spaces_for_tabs_goes_to_the_line_parser(name: str) -> None:
    assert scanned(ref(name)) is None
    assert reader.parse(ref(name)).switches()


@pytest.mark.parametrize(
    "tree",
    [
        FatTree(6, 8, rails=8, spines=4, tiers=3, pod_size=2),
        FatTree(5, 18, rails=4, spines=2, tiers=2),
        FatTree(3, 4, rails=2, swap={("su1-n2", 1): "su2-rail1"}),  # a miscabled HCA
    ],
)
def test_a_synthetic_fabric_derives_the_same_positions(tree: FatTree) -> None:
    text, statuses = tree.render()
    nodes = join.from_statuses(statuses.items())
    dump = scanned(text)
    assert dump is not None
    assert graph(dump) == graph(lines_only(text))
    fast = Positions(domains.derive(dump, nodes))
    slow = Positions(domains.derive(lines_only(text), nodes))
    assert fast.placed == slow.placed and fast.fabric == slow.fabric


def test_windows_cut_anywhere_between_blocks_read_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    text, _ = FatTree(4, 8, rails=4, spines=2, tiers=2).render()
    whole = scanned(text)
    assert whole is not None
    for window in (1, 97, 4096):  # characters: a window then ends at the next blank line
        monkeypatch.setattr(columns, "_WINDOW", window)
        dump = columns.scan(lambda: pieces(text))
        assert dump is not None and graph(dump) == graph(whole)


def _mutations(text: str, rng: random.Random) -> list[str]:
    lines = text.split("\n")
    out = []
    for _ in range(300):
        i = rng.randrange(len(lines))
        copy = list(lines)
        how = rng.randrange(5)
        if how == 0:
            del copy[i]  # a line lost
        elif how == 1:
            copy.insert(i, copy[i])  # a line twice
        elif how == 2 and copy[i]:
            j = rng.randrange(len(copy[i]))
            copy[i] = copy[i][:j] + rng.choice('0123456789abcdefxX[]()" \t#') + copy[i][j + 1 :]
        elif how == 3 and copy[i]:
            copy[i] = copy[i][: rng.randrange(len(copy[i]))]  # a line cut short
        else:
            j = rng.randrange(len(copy))
            copy[i], copy[j] = copy[j], copy[i]  # two lines swapped
        out.append("\n".join(copy))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_an_edited_dump_is_read_as_the_line_parser_reads_it_or_declined(seed: int) -> None:
    text, _ = FatTree(2, 3, rails=2, spines=2, tiers=2).render()
    rng = random.Random(seed)
    declined = 0
    for edited in _mutations(text, rng):
        dump = scanned(edited)
        try:
            expected = graph(lines_only(edited))
        except SourceError:
            assert dump is None, "the scan accepted a dump the line parser refuses"
            declined += 1
            continue
        if dump is None:
            declined += 1
        else:
            assert graph(dump) == expected
    assert declined > 50  # the edits did break dumps


def test_the_line_parser_names_the_line_the_scan_declined() -> None:
    text, _ = FatTree(2, 3, rails=2, spines=2, tiers=2).render()
    lines = text.split("\n")
    far = next(i for i, line in enumerate(lines) if line.startswith("[1]("))
    lines[far] = lines[far].replace('"[', '"[9', 1)  # a port the far end does not list back
    with pytest.raises(SourceError, match=r"^line \d+: .* does not list port \[\d+\] back") as err:
        reader.parse("\n".join(lines))
    assert err.value.line is not None


def test_a_ca_to_ca_cable_reads_in_both_parsers_layouts() -> None:
    # out_ca_port prints a far end that is not a switch as ` (<port GUID>) ` (with a space).
    text = ref("ibnetdiscover/topograph-single-ca-no-switch.out")
    text += (
        "\nvendid=0x2c9\ndevid=0x1021\ncaguid=0xe09d730300000aaa\n"
        'Ca\t1 "H-e09d730300000aaa"\t\t# "host-a mlx5_0"\n'
        '[1](e09d730300000aaa) \t"H-e09d730300000bbb"[1] (e09d730300000bbb) \t\t# lid 1 lmc 0 '
        '"host-b mlx5_0" lid 2 4xNDR\n'
        "\nvendid=0x2c9\ndevid=0x1021\ncaguid=0xe09d730300000bbb\n"
        'Ca\t1 "H-e09d730300000bbb"\t\t# "host-b mlx5_0"\n'
        '[1](e09d730300000bbb) \t"H-e09d730300000aaa"[1] (e09d730300000aaa) \t\t# lid 2 lmc 0 '
        '"host-a mlx5_0" lid 1 4xNDR\n'
    )
    dump = lines_only(text)
    assert {"H-e09d730300000aaa", "H-e09d730300000bbb"} <= set(dump.ids)
    assert scanned(text) is None  # that layout is the line parser's


def test_only_a_newline_ends_a_line() -> None:
    # A form feed inside a description is part of it (str.splitlines would break the line there
    # and refuse the dump, naming a line `sed -n` does not count).
    lines = ref("ibnetdiscover/psmn-x5.topofile").split("\n")
    ca = next(i for i, line in enumerate(lines) if line.startswith("Ca\t"))
    lines[ca] = lines[ca].rsplit("#", 1)[0] + '# "MT25408\fConnectX"'
    edited = "\n".join(lines)
    assert "MT25408\fConnectX" in reader.parse(edited).descs
    assert "MT25408\fConnectX" in lines_only(edited).descs


def test_a_node_whose_hcas_span_leaf_domains_goes_where_most_are_and_is_named() -> None:
    tree = FatTree(3, 4, rails=4, spines=2, tiers=2, swap={("su1-n2", 1): "su2-rail1"})
    text, statuses = tree.render()
    fabric = domains.derive(reader.parse(text), join.from_statuses(statuses.items()))
    leaf = {n: lf.id for lf in fabric.leaves for n in lf.nodes}
    assert leaf["su1-n2"] == leaf["su1-n1"] == "su1-rail1"
    assert (
        "node su1-n2: HCAs on 2 leaf domains (su1-rail1: 3, su2-rail1: 1); placed in su1-rail1"
        in fabric.problems
    )


def test_blocks_in_any_order_read_the_same() -> None:
    text, _ = FatTree(3, 4, rails=2, spines=2, tiers=2).render()
    head, *blocks = text.split("\n\n")
    random.Random(7).shuffle(blocks)
    shuffled = "\n\n".join([head, *blocks])
    dump = scanned(shuffled)
    assert dump is not None
    assert graph(dump) == graph(lines_only(shuffled)) == graph(lines_only(text))


def test_a_router_reads_as_the_line_parser_reads_it() -> None:
    text, _ = FatTree(2, 2, rails=1, spines=1, tiers=2).render()
    leaf = next(line for line in text.split("\n") if line.startswith("Switch\t"))
    guid = leaf.split('"')[1]
    declared = int(leaf.split("\t")[1].split()[0])
    router = "R-e09d7303000000ff"
    text = text.replace(
        leaf,
        leaf.replace(f"Switch\t{declared} ", f"Switch\t{declared + 1} ")
        + f'\n[{declared + 1}]\t"{router}"[1](e09d7303000000ff) \t\t# "gw-1" lid 9 4xNDR',
    )
    text += (
        "\nvendid=0x2c9\ndevid=0x1021\nrtguid=0xe09d7303000000ff\n"
        f'Rt\t1 "{router}"\t\t# "gw-1"\n'
        f'[1](e09d7303000000ff) \t"{guid}"[{declared + 1}]\t\t# lid 9 lmc 0 "sw" lid 1 4xNDR\n'
    )
    dump = scanned(text)
    assert dump is not None
    assert graph(dump) == graph(lines_only(text))
    assert graph(dump)["hosts"][router] == {guid}


def test_carriage_returns_go_to_the_line_parser_and_read_the_same() -> None:
    text = ref("ibnetdiscover/psmn-x5.topofile")
    crlf = text.replace("\n", "\r\n")
    assert scanned(crlf) is None
    assert graph(reader.parse(crlf)) == graph(reader.parse(text))


@pytest.mark.parametrize("seed", range(2))
def test_ends_found_by_a_sort_read_the_same(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # A dump whose Switch lines declare far more ports than it lists finds cable ends by a sort,
    # not a table of every declared port: the same graph, the same refusals.
    monkeypatch.setattr(cables, "TABLE_SLACK", -(1 << 30))
    text, _ = FatTree(2, 3, rails=2, spines=2, tiers=2).render()
    dump = scanned(text)
    assert dump is not None and graph(dump) == graph(lines_only(text))
    for edited in _mutations(text, random.Random(seed))[:100]:
        dump = scanned(edited)
        try:
            expected = graph(lines_only(edited))
        except SourceError:
            assert dump is None
            continue
        assert dump is None or graph(dump) == expected
