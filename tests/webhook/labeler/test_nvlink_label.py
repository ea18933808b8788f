"""The NVLink domain label: from the status's GPUs (NVL72 trays, tests/nvl72.py), else the Node's
`nvidia.com/gpu.clique`; none, and one Warning Event, when the GPUs disagree or are still forming."""

from __future__ import annotations

from typing import Any

from tests.nvl72 import domain, tray_status
from tests.webhook.labeler.test_labeler import converge, started, status
from tests.webhook.node_fakes import NodeServer

KEY = "gpufabric.io/nvlink-domain"
CLIQUE = "nvidia.com/gpu.clique"
NAME = "nvl00-c01"


def st(**kw: Any) -> dict[str, Any]:
    return dict(tray_status(0, 0, **kw)["status"])


def run(
    statuses: dict[str, Any], nodes: dict[str, dict[str, str]]
) -> tuple[Any, NodeServer, list[Any]]:
    server = NodeServer(nodes)
    said: list[tuple[str, str, str]] = []
    labeler = started(server, statuses, report=lambda *a: said.append(a))
    return labeler, server, said


def test_every_gpu_in_one_domain_labels_the_node_with_it() -> None:
    _, server, said = run({NAME: st()}, {NAME: {}})
    assert server.nodes[NAME].labels[KEY] == domain(0)
    assert said == []


def test_status_wins_over_the_clique_label_and_the_clique_label_fills_in() -> None:
    other = f"{'1' * 8}-1111-1111-1111-{'1' * 12}.3"
    _, server, _ = run(
        {NAME: st(), "plain": st(cliques=(None,) * 4)},
        {NAME: {CLIQUE: other}, "plain": {CLIQUE: other}, "no-status": {CLIQUE: other}},
    )
    assert server.nodes[NAME].labels[KEY] == domain(0)
    assert server.nodes["plain"].labels[KEY] == other  # GPUs without fabric: GFD's label
    assert server.nodes["no-status"].labels[KEY] == other


def test_disagreeing_or_forming_gpus_get_no_label_and_one_event_saying_why() -> None:
    labeler, server, said = run(
        {NAME: st(racks=(0, 0, 1, 1)), "forming": st(cliques=(1, 1, None, 1))},
        {NAME: {CLIQUE: domain(0)}, "forming": {}},  # the clique label cannot settle a dispute
    )
    assert KEY not in server.nodes[NAME].labels
    assert KEY not in server.nodes["forming"].labels
    reasons = {n: (r, m) for n, r, m in said}
    assert reasons[NAME][0] == "NoNVLinkDomain"
    assert reasons[NAME][1].startswith(f"no {KEY} label: GPUs disagree on their NVLink domain: ")
    assert reasons["forming"][1] == (
        f"no {KEY} label: NVLink fabric still forming: GPUs 2 have no fabric yet"
    )
    # Another status event with the same reason says nothing again.
    labeler.status_event("MODIFIED", status("forming", st(cliques=(1, 1, None, 1)), "2"))
    converge(labeler, server)
    assert len(said) == 2
    # The fabric forms: the label appears, as the only change.
    labeler.status_event("MODIFIED", status("forming", st(), "3"))
    converge(labeler, server)
    assert server.nodes["forming"].labels[KEY] == domain(0)
    assert len(said) == 2


def test_a_label_no_longer_asserted_goes_away_and_other_managers_keep_theirs() -> None:
    labeler, server, _ = run({NAME: st()}, {NAME: {"team": "a"}})
    assert server.nodes[NAME].labels[KEY] == domain(0)
    labeler.status_event("MODIFIED", status(NAME, st(racks=(0, 1, 1, 1)), "2"))
    converge(labeler, server)
    assert KEY not in server.nodes[NAME].labels
    assert server.nodes[NAME].labels["team"] == "a"
    assert server.nodes[NAME].labels["gpufabric.io/gpu-count"] == "4"


def test_the_clique_label_arriving_later_labels_the_node() -> None:
    labeler, server, _ = run({"plain": st(cliques=(None,) * 4)}, {"plain": {}})
    assert KEY not in server.nodes["plain"].labels
    server.label("plain", CLIQUE, domain(5))  # GFD writes it once the partition formed
    converge(labeler, server)
    assert server.nodes["plain"].labels[KEY] == domain(5)
    server.label("plain", CLIQUE, None)
    converge(labeler, server)
    assert KEY not in server.nodes["plain"].labels
