"""The agent's side of the NVLink domain (NVL72 trays from tests/nvl72.py): status.summary carries
it (and `probe -o labels` prints it), `probe -o table` shows it or why there is none."""

from __future__ import annotations

from agent.assemble import Assembled, Place
from agent.table import render
from agent.topology import Locality
from common.labels import labels_for
from common.model import NodeStatus
from tests.nvl72 import domain, tray_status

KEY = "gpufabric.io/nvlink-domain"


def assembled(**kw: object) -> Assembled:
    status = NodeStatus.from_dict(tray_status(0, 0, **kw)["status"])  # type: ignore[arg-type]
    places = tuple(
        Place(
            f"GPU{g.index}", str(g.index), g.pci_bus_id, Locality(root=f"pci{g.pci_bus_id[:4]}:00")
        )
        for g in status.gpus
    )
    return Assembled(status, places)


def test_summary_and_labels_carry_the_domain_only_when_every_gpu_agrees() -> None:
    formed = assembled().status
    assert formed.summary.nvlink_domain == domain(0)
    assert formed.to_dict()["summary"]["nvlinkDomain"] == domain(0)  # type: ignore[index]
    assert labels_for(formed.summary)[KEY] == domain(0)
    split = assembled(racks=(0, 1, 0, 1)).status
    assert split.summary.nvlink_domain is None
    assert "nvlinkDomain" not in split.to_dict()["summary"]  # type: ignore[operator]
    assert KEY not in labels_for(split.summary)


def test_table_shows_the_domain_or_why_there_is_none() -> None:
    assert f"  NVLink domain ({KEY}): {domain(0)}" in render(assembled()).splitlines()
    text = render(assembled(cliques=(1, None, 1, 1)))
    assert f"  NVLink domain ({KEY}): none (NVLink fabric still forming: GPUs 1 have no" in text
