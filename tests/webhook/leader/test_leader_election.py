"""Leader election on a fake clock against a fake Lease server that answers like the captured
kube-apiserver (tests/webhook/lease_fakes.py), through flaky networks. No sleeps: time is the
fake clock, advanced by the simulation."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import reference
from tests.webhook.election_sim import Cluster
from tests.webhook.lease_fakes import NAMESPACE, LeaseServer
from webhook.leader import Lease, LeaseError, Timing, micro_time

WIRE = reference.WIRE / "leases"


def exchange(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((WIRE / name).read_text())  # type: ignore[no-any-return]


def test_micro_time_has_six_digits_even_on_a_whole_second() -> None:
    assert micro_time(datetime(2026, 11, 22, 14, 27, tzinfo=UTC)) == "2026-11-22T14:27:00.000000Z"
    # isoformat() is what the kubernetes client used; the server refuses it (leases/06).
    assert datetime(2026, 11, 22, 14, 27, tzinfo=UTC).isoformat() == "2026-11-22T14:27:00+00:00"


def test_fake_server_refuses_the_time_formats_the_real_one_refused() -> None:
    server = LeaseServer()
    lease = Lease.new("gpufabric-labeler", "a", 15, datetime(2026, 11, 22, 14, 27, tzinfo=UTC))
    lease = server.create(lease, 1)
    for x in exchange("06-microtime-formats.json"):
        renew = x["request"]["body"]["spec"]["renewTime"]
        attempt = Lease(**{**_fields(lease), "renew_time": renew})
        if x["response"]["status"] == 200:
            lease = server.replace(attempt, 1)
            assert lease.renew_time == x["response"]["body"]["spec"]["renewTime"]
        else:
            with pytest.raises(LeaseError, match="HTTP 400"):
                server.replace(attempt, 1)


def _fields(lease: Lease) -> dict:  # type: ignore[type-arg]
    return {k: getattr(lease, k) for k in Lease.__slots__}


def test_lease_wire_form_is_the_captured_one() -> None:
    created = exchange("02-create.json")
    lease = Lease.from_body(created["response"]["body"])
    assert lease.holder == "gpufabric-webhook-7d9f-abcde"
    assert (lease.duration_s, lease.transitions, lease.resource_version) == (15, 0, "1894")
    renew = exchange("03-renew-update.json")["request"]["body"]
    renewed = Lease(**{**_fields(lease), "renew_time": renew["spec"]["renewTime"]})
    assert renewed.to_body(NAMESPACE) == renew
    fresh = Lease.new(
        "gpufabric-labeler",
        "gpufabric-webhook-7d9f-abcde",
        15,
        datetime(2026, 11, 22, 14, 26, 49, 349006, tzinfo=UTC),
    )
    assert fresh.to_body(NAMESPACE) == created["request"]["body"]


def test_timing_must_leave_the_leader_time_to_stop() -> None:
    with pytest.raises(ValueError, match="renew_deadline < lease_duration"):
        Timing(lease_duration=10, renew_deadline=10)


def test_one_replica_acquires_renews_every_retry_period_and_runs_one_worker() -> None:
    c = Cluster()
    a = c.add("a")
    c.run_until(60)
    assert c.leader() is a
    assert a.intervals[0][0] == 0.0
    assert a.starts == 1
    # 1 create + one renewal every 2 s; each round is a GET then a write.
    assert c.server.writes == 1 + 30
    c.shutdown()
    c.assert_one_leader_at_a_time()


def test_a_60s_outage_stops_the_leader_within_the_renew_deadline_and_restarts_one_worker() -> None:
    """Issue 11: the old labeler kept leading through the outage and then ran a second watch."""
    c = Cluster()
    a = c.add("a")
    c.run_until(30)
    last_renewal = 30.0
    a.net.down = True
    c.run_until(90)
    assert not a.elector.leading
    stopped_at = a.intervals[0][1]
    assert stopped_at <= last_renewal + Timing().renew_deadline
    assert a.running == 0
    a.net.down = False
    c.run_until(120)
    assert a.elector.leading
    assert a.starts == 2 and a.max_running == 1
    c.assert_one_leader_at_a_time()


@pytest.mark.parametrize("stop_delay", [0.0, 4.5])
def test_a_cut_off_leader_stops_before_the_other_replica_takes_over(stop_delay: float) -> None:
    c = Cluster()
    a = c.add("a", stop_delay=stop_delay)
    c.run_until(1)
    b = c.add("b")
    c.run_until(20)
    assert c.leader() is a
    a.net.down = True
    c.run_until(60)
    assert c.leader() is b
    a_end, b_start = a.intervals[0][1], b.intervals[0][0]
    assert a_end <= b_start
    c.assert_one_leader_at_a_time()


@pytest.mark.parametrize("kill_phase", [0.0, 0.5, 1.0, 1.5, 1.999])
def test_failover_after_a_killed_leader_within_20s(kill_phase: float) -> None:
    c = Cluster()
    a = c.add("a")
    c.add("b")
    c.run_until(20 + kill_phase)
    assert c.leader() is a
    killed_at = c.clock.monotonic()
    a.kill()
    c.run_until(60)
    b = c.leader()
    assert b is not None and b.name == "b"
    failover = b.intervals[0][0] - killed_at
    assert Timing().lease_duration - Timing().retry_period <= failover <= 20.0
    c.assert_one_leader_at_a_time()


def test_release_on_shutdown_hands_over_within_one_retry_period() -> None:
    c = Cluster()
    a = c.add("a")
    b = c.add("b")
    c.run_until(20)
    assert c.leader() is a
    a.elector.release()
    a.alive = False
    released_at = c.clock.monotonic()
    c.run_until(40)
    assert c.leader() is b
    assert b.intervals[0][0] - released_at <= Timing().retry_period
    c.assert_one_leader_at_a_time()


def test_two_replicas_starting_together_elect_one() -> None:
    c = Cluster()
    c.add("a")
    c.add("b")
    c.run_until(30)
    assert c.leader() is not None
    assert sum(r.starts for r in c.replicas) == 1
    c.assert_one_leader_at_a_time()


def test_renewal_whose_answer_is_lost_does_not_cost_leadership() -> None:
    c = Cluster()
    a = c.add("a", p_lost=0.5, seed=3)
    c.add("b")
    c.run_until(120)
    assert c.leader() is a
    assert a.starts == 1
    c.assert_one_leader_at_a_time()


def test_hung_requests_are_cut_off_at_the_renew_deadline() -> None:
    c = Cluster()
    a = c.add("a")
    c.add("b")
    c.run_until(10)
    a.net.p_hang = 1.0  # every request hangs until its timeout
    c.run_until(60)
    assert not a.elector.leading
    assert a.intervals[0][1] <= 10 + Timing().renew_deadline
    c.assert_one_leader_at_a_time()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**16),
    faults=st.lists(
        st.tuples(
            st.floats(0.0, 0.6),  # p_error
            st.floats(0.0, 0.3),  # p_lost
            st.floats(0.0, 0.2),  # p_hang
            st.floats(0.0, 1.5),  # latency
            st.floats(0.0, 4.9),  # stop delay
        ),
        min_size=2,
        max_size=3,
    ),
    outages=st.lists(st.tuples(st.integers(0, 2), st.floats(0, 150), st.floats(1, 60)), max_size=4),
    kill=st.one_of(st.none(), st.tuples(st.integers(0, 2), st.floats(0, 150))),
)
def test_no_two_leaders_under_any_mix_of_faults(
    seed: int,
    faults: list[tuple[float, float, float, float, float]],
    outages: list[tuple[int, float, float]],
    kill: tuple[int, float] | None,
) -> None:
    c = Cluster()
    for i, (p_error, p_lost, p_hang, latency, stop_delay) in enumerate(faults):
        c.add(
            f"r{i}",
            seed=seed + i,
            stop_delay=stop_delay,
            p_error=p_error,
            p_lost=p_lost,
            p_hang=p_hang,
            latency=latency,
        )
    events: list[tuple[float, str, int]] = []
    for who, start, length in outages:
        events += [(start, "down", who), (start + length, "up", who)]
    if kill is not None:
        events.append((kill[1], "kill", kill[0]))
    for at, what, who in sorted(events):
        c.run_until(at)
        if who >= len(c.replicas):
            continue
        r = c.replicas[who]
        if what == "kill" and r.alive:
            r.kill()
        else:
            r.net.down = what == "down"
    c.run_until(220)
    c.assert_one_leader_at_a_time()
    # Liveness: with a healthy network for the last stretch, someone leads.
    for r in c.replicas:
        r.net.down = False
        r.net.p_error = r.net.p_lost = r.net.p_hang = 0.0
    c.run_until(260)
    if any(r.alive for r in c.replicas):
        assert c.leader() is not None
    c.shutdown()
    c.assert_one_leader_at_a_time()
