"""The webhook's narrow status decoder agrees with the full model and names bad fields."""

from __future__ import annotations

from typing import Any

import pytest

from common.labels import labels_for
from common.model import DISTANCE_ORDER, NodeStatus
from common.wire import WireError
from tests.webhook.helpers import golden_statuses
from webhook.fleet.ingest import layout_of


def _from_full_model(status: dict[str, Any]) -> tuple[dict[str, str], tuple[str, ...], str]:
    """The same facts computed from the whole NodeStatus, the way the webhook did before."""
    parsed = NodeStatus.from_dict(status)
    usable = set(parsed.summary.usable_hcas)
    worst = ""
    for gpu in parsed.gpus:
        near = [h.distance for h in gpu.nearest_hcas if h.name in usable]
        if near:
            d = min(near, key=DISTANCE_ORDER.__getitem__)
            worst = d if not worst or DISTANCE_ORDER[d] > DISTANCE_ORDER[worst] else worst
    return labels_for(parsed.summary), parsed.summary.usable_hcas, worst


@pytest.mark.parametrize(("name", "status"), golden_statuses())
def test_layout_matches_the_full_model(name: str, status: dict[str, Any]) -> None:
    layout = layout_of(status)
    assert (layout.labels, layout.usable_hcas, layout.gdr_level) == _from_full_model(status)


@pytest.mark.parametrize(
    ("status", "message"),
    [
        ({"summary": {"gpuCount": "8"}}, r"status\.summary\.gpuCount: expected an integer"),
        ({"summary": {"cufile": "maybe"}}, r"status\.summary\.cufile: 'maybe' is not one of"),
        ({"summary": None}, r"status\.summary: expected an object"),
        ({"gpus": {}}, r"status\.gpus: expected a list"),
        (
            {"gpus": [{"nearestHcas": [{"name": "mlx5_0", "distance": "FAR"}]}]},
            r"status\.gpus\[0\]\.nearestHcas\[0\]\.distance: 'FAR' is not one of",
        ),
        (
            {"gpus": [{}, {"nearestHcas": [{"distance": "PIX"}]}]},
            r"status\.gpus\[1\]\.nearestHcas\[0\]: missing required field 'name'",
        ),
    ],
)
def test_bad_fields_are_named(status: dict[str, Any], message: str) -> None:
    with pytest.raises(WireError, match=message):
        layout_of(status)
