"""Every memo keyed by pod shapes is bounded in entries and in what one entry keeps (issue 17:
RSS grew under sustained review load). A pod can be 1.5 MiB, so nothing read from it goes into a
key unchecked: each table here stays within its cap and keeps no pod-sized key."""

from __future__ import annotations

from common import api
from tests.webhook.admission.test_hca_pin import _cache
from tests.webhook.helpers import pod
from webhook.admission import placement
from webhook.admission import requirements as rq
from webhook.admission.placement import Settings, mutate, plan, query_of
from webhook.admission.requirements import Requirements, requirements

LONG_HCAS = tuple(f"mlx5_{i}" for i in range(5000))


def test_plan_is_keyed_by_what_it_reads_not_by_the_pods_lists() -> None:
    short = Requirements(gpus=8, rdma="required", preferred_hcas=("mlx5_0",))
    long = Requirements(gpus=8, rdma="required", preferred_hcas=LONG_HCAS, claim="c" * 253)
    assert plan(short) is plan(long)  # one entry, and it holds no 5,000-name list


def test_plan_memo_never_exceeds_its_cap() -> None:
    for gpus in range(placement.PLANS + 100):
        plan(Requirements(gpus=gpus, topology="nvlink"))
    assert placement._plan.cache_info().currsize <= placement.PLANS


def test_selector_values_no_label_can_hold_are_not_interned() -> None:
    before = placement._only.cache_info()
    p = pod(nodeSelector={api.LABEL_HCA_PROFILE: "x" * 100_000})
    query = query_of(p)
    assert query == (((api.LABEL_HCA_PROFILE, "In", ("x" * 100_000,)),),)
    after = placement._only.cache_info()
    assert (after.hits, after.misses) == (before.hits, before.misses)


def test_interned_queries_never_exceed_their_cap() -> None:
    for i in range(placement.QUERIES + 100):
        query_of(pod(nodeSelector={api.LABEL_HCA_PROFILE: f"p{i}"}))
    assert placement._only.cache_info().currsize <= placement.QUERIES


def test_pinned_warnings_never_exceed_their_cap() -> None:
    cache = _cache()
    for ports in range(1, placement.PINNED // 8 + 2):
        for gpus in range(1, 9):
            p = pod({api.ANN_RDMA: "required", api.ANN_RDMA_MIN_PORTS: str(ports)}, gpus=gpus)
            mutate(p, requirements(p, "team-a", cache.claim), cache.groups(), Settings())
    assert placement._pinned.cache_info().currsize <= placement.PINNED


def test_inline_readings_never_exceed_their_cap() -> None:
    for i in range(rq.INLINE_READINGS + 50):
        p = pod({api.ANN_PREFERRED_HCAS: f"mlx5_{i}"})
        rq.check(p, "team-a", lambda ns, n: None)
    assert rq._memo_inline.cache_info().currsize <= rq.INLINE_READINGS
