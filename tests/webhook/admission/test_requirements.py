from __future__ import annotations

from typing import Any

import pytest

from tests.webhook.helpers import pod
from webhook.admission.requirements import Invalid, Requirements, requirements

CLAIM = {
    "topology": {"mode": "nvlink", "minBandwidthGBps": 600},
    "network": {"rdmaRequired": True, "minPorts": 4, "preferredHcas": ["mlx5_0", "mlx5_1"]},
    "storage": {"cuFile": "Required"},
}


def lookup(ns: str, name: str) -> dict[str, Any] | None:
    return CLAIM if (ns, name) == ("team-a", "tp8-ib") else None


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({"gpufabric.io/rdma": "required"}, Requirements(gpus=8, rdma="required")),
        ({"gpufabric.io/topology": "same-socket"}, Requirements(gpus=8, topology="same-socket")),
        (
            {"gpufabric.io/rdma-min-ports": "4"},
            Requirements(gpus=8, rdma="required", rdma_min_ports=4),
        ),
        (
            {"gpufabric.io/preferred-hcas": "mlx5_0, mlx5_3"},
            Requirements(gpus=8, rdma="required", preferred_hcas=("mlx5_0", "mlx5_3")),
        ),
        ({"gpufabric.io/cufile": "Preferred"}, Requirements(gpus=8, cufile="preferred")),
        (
            {"gpufabric.io/claim": "tp8-ib", "gpufabric.io/min-nvlink-bandwidth-gbps": "900"},
            Requirements(
                gpus=8,
                rdma="required",
                rdma_min_ports=4,
                preferred_hcas=("mlx5_0", "mlx5_1"),
                cufile="required",
                topology="nvlink",
                min_nvlink_bandwidth=900,
                claim="tp8-ib",
            ),
        ),
        (
            {"gpufabric.io/claim": "tp8-ib", "gpufabric.io/rdma": "preferred"},
            Requirements(
                gpus=8,
                rdma="preferred",
                rdma_min_ports=4,
                preferred_hcas=("mlx5_0", "mlx5_1"),
                cufile="required",
                topology="nvlink",
                min_nvlink_bandwidth=600,
                claim="tp8-ib",
            ),
        ),
    ],
    ids=[
        "rdma",
        "same-socket",
        "min-ports-implies-rdma",
        "hcas",
        "cufile-case",
        "claim+override",
        "annotation-overrides-claim-field",
    ],
)
def test_requirements_from_annotations_and_claims(
    annotations: dict[str, str], expected: Requirements
) -> None:
    assert requirements(pod(annotations), "team-a", lookup) == expected


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        (
            {"gpufabric.io/rdma": "mandatory"},
            "gpufabric.io/rdma: 'mandatory' is not valid; accepted values: required, preferred",
        ),
        (
            {"gpufabric.io/rdma-min-ports": "four"},
            "gpufabric.io/rdma-min-ports: 'four' is not an integer >= 1",
        ),
        (
            {"gpufabric.io/rdma-min-ports": "0"},
            "gpufabric.io/rdma-min-ports: 0 is below the minimum 1",
        ),
        ({"gpufabric.io/topology": "ring"}, "accepted values: any, same-socket, nvlink"),
        (
            {"gpufabric.io/min-nvlink-bandwidth-gbps": "fast"},
            "gpufabric.io/min-nvlink-bandwidth-gbps: 'fast' is not an integer",
        ),
        ({"gpufabric.io/claim": "nope"}, "GpuClaim 'nope' not found in namespace 'team-a'"),
        ({"gpufabric.io/rmda": "required"}, "unknown annotation 'gpufabric.io/rmda'"),
        ({"gpufabric.io/preferred-hcas": "mlx5_0;rm -rf"}, "is not an HCA name"),
    ],
    ids=[
        "bad-level",
        "not-int",
        "below-min",
        "bad-topology",
        "bad-bw",
        "missing-claim",
        "typo",
        "bad-hca",
    ],
)
def test_bad_annotations_are_denied_with_a_message_naming_them(
    annotations: dict[str, str], message: str
) -> None:
    with pytest.raises(Invalid, match=None) as info:
        requirements(pod(annotations), "team-a", lookup)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"topology": {"mode": "mesh"}}, "spec.topology.mode: 'mesh'"),
        ({"network": {"minPorts": 0}}, "spec.network.minPorts: 0 is below the minimum 1"),
        (
            {"network": {"rdmaRequired": "yes"}},
            "spec.network.rdmaRequired: 'yes' is not true or false",
        ),
        ({"storage": {"cuFile": "always"}}, "accepted values: Required, Preferred"),
        ({"network": "mlx5_0"}, "spec.network is not an object"),
    ],
)
def test_invalid_claims_are_denied_naming_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(Invalid) as info:
        requirements(pod({"gpufabric.io/claim": "c"}), "ns", lambda ns, n: spec)
    assert message in str(info.value)


def test_gpu_count_sums_limits_and_rejects_garbage() -> None:
    p = pod({"gpufabric.io/rdma": "required"}, gpus=4)
    p["spec"]["containers"][1]["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
    assert requirements(p, "team-a", lookup).gpus == 6
    p["spec"]["containers"][1]["resources"] = {"limits": {"nvidia.com/gpu": "two"}}
    with pytest.raises(Invalid, match="is not an integer"):
        requirements(p, "team-a", lookup)


@pytest.mark.parametrize(
    ("limit", "gpus"),
    [
        ("8", 8),
        ("08", 8),
        ("+8", 8),
        ("9223372036854775807", 2**63 - 1),
        ("9223372036854775808", None),  # beyond int64
        ("-1", None),
        ("\u0663", None),  # an Arabic-Indic three: a digit to str.isdigit, not to the API server
        ("\u00b2", None),  # superscript two
        ("", None),
    ],
)
def test_gpu_limits_read_as_the_api_server_reads_them(limit: str, gpus: int | None) -> None:
    p = pod({"gpufabric.io/rdma": "required"})
    p["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": limit}}
    if gpus is None:
        with pytest.raises(Invalid, match="is not an integer"):
            requirements(p, "team-a", lookup)
    else:
        assert requirements(p, "team-a", lookup).gpus == gpus


def test_every_bad_annotation_is_listed_in_one_denial() -> None:
    p = pod(
        {
            "gpufabric.io/rdma": "mandatory",
            "gpufabric.io/topology": "ring",
            "gpufabric.io/rmda": "required",
            "gpufabric.io/claim": "nope",
            "gpufabric.io/min-nvlink-bandwidth-gbps": "fast",
        }
    )
    p["spec"]["containers"][1]["resources"] = {"limits": {"nvidia.com/gpu": "two"}}
    with pytest.raises(Invalid) as info:
        requirements(p, "team-a", lookup)
    problems = info.value.problems
    assert len(problems) == 6, problems
    for needle in (
        "unknown annotation 'gpufabric.io/rmda'",
        "GpuClaim 'nope' not found",
        "gpufabric.io/rdma: 'mandatory'",
        "gpufabric.io/topology: 'ring'",
        "gpufabric.io/min-nvlink-bandwidth-gbps: 'fast'",
        "nvidia.com/gpu limit 'two'",
    ):
        assert any(needle in prob for prob in problems), needle
        assert needle in str(info.value)


def test_claim_problems_are_all_listed_too() -> None:
    spec = {"topology": {"mode": "mesh"}, "network": {"minPorts": 0, "rdmaRequired": "yes"}}
    with pytest.raises(Invalid) as info:
        requirements(pod({"gpufabric.io/claim": "c"}), "ns", lambda ns, n: spec)
    assert len(info.value.problems) == 3


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("9223372036854775807", True),
        ("9223372036854775808", False),
        ("99999999999999999999999999", False),
        ("1_000", False),
        (" 8 ", True),
    ],
)
def test_integers_beyond_int64_are_refused(value: str, ok: bool) -> None:
    p = pod({"gpufabric.io/min-nvlink-bandwidth-gbps": value})
    if ok:
        assert requirements(p, "team-a", lookup).min_nvlink_bandwidth == int(value)
        return
    with pytest.raises(Invalid) as info:
        requirements(p, "team-a", lookup)
    assert "gpufabric.io/min-nvlink-bandwidth-gbps" in str(info.value)
    if value.isdigit():
        assert "beyond the Kubernetes int64 range" in str(info.value)


def test_group_annotations_are_known_not_denied() -> None:
    p = pod(
        {
            "gpufabric.io/group": "job-1",
            "gpufabric.io/group-size": "4",
            "gpufabric.io/rdma": "required",
        }
    )
    assert requirements(p, "team-a", lookup).rdma == "required"


def test_long_values_are_cut_in_the_denial() -> None:
    with pytest.raises(Invalid) as info:
        requirements(pod({"gpufabric.io/rdma": "x" * 100_000}), "team-a", lookup)
    assert len(str(info.value)) < 300
