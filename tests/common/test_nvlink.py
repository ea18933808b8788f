"""The NVLink domain value: one per (clusterUuid, cliqueId), the same from both sources."""

from __future__ import annotations

from common import nvlink

U = "6A1C9B3E-0F2D-4E5A-9B7C-1D2E3F405162"


def gpu(i: int, cluster: str | None = U, clique: int = 7) -> dict[str, object]:
    out: dict[str, object] = {"index": i}
    if cluster is not None:
        out["fabric"] = {"clusterUuid": cluster, "cliqueId": clique}
    return out


def test_status_and_clique_label_give_one_value_for_one_domain() -> None:
    from_status = nvlink.from_gpus([gpu(i) for i in range(4)]).value
    from_label = nvlink.from_clique_label(f"{U.lower()}.7")
    assert from_status == from_label == "6a1c9b3e-0f2d-4e5a-9b7c-1d2e3f405162.7"
    assert len(from_status) <= 63


def test_zero_uuid_malformed_and_absent_are_no_domain() -> None:
    zero = "00000000-0000-0000-0000-000000000000"
    assert nvlink.from_gpus([gpu(0, zero), gpu(1, zero)]) == nvlink.NONE
    assert nvlink.from_gpus([gpu(0, None)]) == nvlink.NONE
    assert nvlink.from_gpus([]) == nvlink.NONE
    for bad in ("", "x", f"{U}.", f"{U}.-1", f"{U}.x", f"{zero}.3", "not-a-uuid.3", f"{U}.{2**32}"):
        assert nvlink.from_clique_label(bad) is None, bad
    assert nvlink.domain_value(U, True) is None


def test_disagreeing_or_forming_gpus_give_none_and_say_why() -> None:
    split = nvlink.from_gpus([gpu(0), gpu(1, clique=8)])
    assert split.value is None and "disagree" in split.reason and "GPUs 1 in" in split.reason
    forming = nvlink.from_gpus([gpu(0), gpu(1, None)])
    assert forming.value is None and "forming" in forming.reason and "GPUs 1 " in forming.reason


def test_status_wins_over_the_clique_label_and_a_dispute_is_not_settled_by_it() -> None:
    other = "11111111-2222-3333-4444-555555555555.2"
    label = {"nvidia.com/gpu.clique": other}
    assert nvlink.node_domain({"gpus": [gpu(0)]}, label).value == f"{U.lower()}.7"
    assert nvlink.node_domain({"gpus": [gpu(0, None)]}, label).value == other
    assert nvlink.node_domain(None, label).value == other
    assert nvlink.node_domain({"gpus": [gpu(0), gpu(1, clique=3)]}, label).value is None
    assert nvlink.node_domain({"gpus": [gpu(0, None)]}, {}).value is None
