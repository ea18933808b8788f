from __future__ import annotations

import pytest
import yaml

from common import api
from common.labels import hca_profile, labels_for
from common.model import NodeStatus, Summary
from common.wire import WireError, camel, from_wire
from tests.agent.test_golden import GOLDEN
from tests.conftest import HOSTS


@pytest.mark.parametrize("host", HOSTS)
def test_status_round_trips_through_the_wire_form(host: str) -> None:
    data = yaml.safe_load((GOLDEN / f"{host}.yaml").read_text())["status"]
    assert NodeStatus.from_dict(data).to_dict() == data


def test_from_wire_names_the_bad_field() -> None:
    with pytest.raises(WireError, match=r"status\.summary\.gpuCount: expected an integer"):
        NodeStatus.from_dict({"summary": {"gpuCount": "8"}})
    with pytest.raises(WireError, match="missing required field 'index'"):
        NodeStatus.from_dict({"gpus": [{"pciBusId": "0000:19:00.0"}]})
    with pytest.raises(WireError, match="not one of"):
        from_wire(Summary, {"cufile": "maybe"})


def test_camel() -> None:
    assert camel("nvlink_island_size") == "nvlinkIslandSize"


def test_hca_profile_is_order_independent_and_short() -> None:
    assert hca_profile(["mlx5_1", "mlx5_0"]) == hca_profile(["mlx5_0", "mlx5_1", "mlx5_0"])
    assert hca_profile(["mlx5_0"]) != hca_profile(["mlx5_1"])
    assert len(hca_profile(["mlx5_0"])) == 10
    assert hca_profile([]) == "none"


def test_labels_cover_exactly_the_design_keys() -> None:
    labels = labels_for(Summary(gpu_count=8, numa_gpus_max=4))
    assert set(labels) == set(api.ALL_LABELS)
    labels = labels_for(Summary())
    assert set(labels) == set(api.ALL_LABELS) - {api.LABEL_NUMA_GPUS_MAX}
    assert labels[api.LABEL_RDMA] == "false"
    assert labels[api.LABEL_HCA_PROFILE] == "none"
