"""One definition of the GpuFabric status (webhook/fabric/shape.py): what render writes reads back
the same, and the webhook's reader (groups/admission/spines.py) reads what the controller publishes
(issue 36: it iterated spines[].leaves, a count since the object shrank, and failed on every
event). Another shape is refused naming the field, never a TypeError in a watch."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.webhook.fabric.test_gpufabric_size import _fabric
from tests.webhook.fabric.test_nvlink_domains import tray_statuses, view_of
from webhook.fabric import render
from webhook.fabric.controller import FabricController
from webhook.fabric.levels import Positions
from webhook.fabric.shape import FabricStatus, ShapeError
from webhook.groups.admission.spines import SpineSizes

CONF = (
    "SwitchName=s0 Nodes=a[1-4]\nSwitchName=s1 Nodes=b[1-2]\nSwitchName=s2 Nodes=c[1-3]\n"
    "SwitchName=top Switches=s[0-1]\nSwitchName=other Switches=s2\n"
)


def _round_trip(body: dict[str, Any]) -> FabricStatus:
    read = FabricStatus.from_json(body)
    assert read.to_json() == body
    return read


def test_what_render_writes_reads_back_the_same_with_nvlink_domains() -> None:
    statuses = tray_statuses(moved=4)
    positions, view = view_of(statuses)
    written = render.fabric_status(positions.fabric, positions, view)
    read = _round_trip(render.status(positions.fabric, positions, view))
    assert read == written
    assert read.nvlink_domains and read.summary.nvlink_domains == 8
    assert all(isinstance(s.leaves, int) and s.nvlink_domains for s in read.spines)


def test_what_render_writes_reads_back_the_same_at_size_with_problems_and_tiers() -> None:
    fabric = _fabric(64, 4, 2, 30)
    read = _round_trip(render.status(fabric, Positions(fabric)))
    assert read.tiers == (16384, 8192, 16)
    assert len(read.problems) == render.LISTED and read.summary.problems == 30
    assert [s.nodes for s in read.spines] == [128, 128]
    assert read.spines[0].switches == 512


def test_the_webhook_reads_the_object_the_controller_publishes() -> None:
    c = FabricController()
    c.configmap({"topology.conf": CONF})
    _, body = c.refresh()
    assert body is not None
    spines = SpineSizes()
    spines.listed([body])
    assert spines.spines == {"top": 6, "other": 3}
    assert spines.largest(lambda: 8) == 48  # 6 nodes of at most 8 GPUs
    spines.event("MODIFIED", body)
    assert spines.spines == {"top": 6, "other": 3}
    spines.event("DELETED", body)
    assert spines.largest(lambda: 8) is None


def test_another_shape_is_refused_naming_the_field(caplog: pytest.LogCaptureFixture) -> None:
    c = FabricController()
    c.configmap({"topology.conf": CONF})
    _, body = c.refresh()
    assert body is not None
    listing = {  # the per-node shape of `topology -o yaml`, not the object's
        "metadata": {"name": "cluster"},
        "status": {**body["status"], "spines": [{"name": "top", "leaves": [{"name": "s0"}]}]},
    }
    with pytest.raises(ShapeError, match=r"status\.spines\[0\]\.leaves: expected an integer"):
        FabricStatus.from_json(listing["status"])
    spines = SpineSizes()
    spines.listed([body])
    with caplog.at_level(logging.WARNING, logger="webhook.groups.admission.spines"):
        spines.event("MODIFIED", listing)
        spines.event("MODIFIED", listing)
    assert spines.largest(lambda: 8) is None  # no warning from a fabric it cannot read
    assert [r.getMessage() for r in caplog.records] == ["GpuFabric status not read"]  # once
    spines.event("MODIFIED", body)
    assert spines.spines == {"top": 6, "other": 3}


@pytest.mark.parametrize(
    ("status", "where"),
    [
        ([], "status: expected an object, got list"),
        ({"summary": {"nodes": "3"}}, "status.summary.nodes: expected an integer, got str"),
        ({"spines": [{"leaves": 1}]}, r"status.spines\[0\].name: expected a string, got null"),
        ({"unplaced": [{"node": "a"}]}, r"status.unplaced\[0\].reason: expected a string"),
        ({"tiers": [True]}, r"status.tiers\[0\]: expected an integer, got bool"),
    ],
)
def test_each_wrong_field_is_named(status: Any, where: str) -> None:
    with pytest.raises(ShapeError, match=where):
        FabricStatus.from_json(status)
