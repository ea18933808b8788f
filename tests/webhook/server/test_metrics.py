"""The webhook's per-review metrics expose what prometheus_client's own Counter and Histogram
would for the same reviews (they are counted in plain ints instead: see webhook.server.metrics)."""

from __future__ import annotations

import re

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from webhook.server.metrics import ADMISSION_BUCKETS, WebhookMetrics

# On each bound, just below and above it, far above every bound, and a bad request (no duration).
REVIEWS = [
    ("mutated", 0.0005),
    ("mutated", 0.00049),
    ("warned", 0.0011),
    ("untouched", 0.1),
    ("denied", 7.5),
    ("bad_request", None),
    ("mutated", 0.025),
]


def _samples(text: str, name: str) -> list[str]:
    # The sample lines of one metric, without the _created ones prometheus_client adds.
    return [
        line
        for line in text.splitlines()
        if re.match(rf"{name}(_bucket|_count|_sum|_total)?[{{ ]", line)
    ]


def test_admissions_expose_what_prometheus_counter_and_histogram_would() -> None:
    ours = WebhookMetrics()
    registry = CollectorRegistry()
    outcomes = Counter(
        "gpufabric_webhook_admissions_total", "answers", ["outcome"], registry=registry
    )
    duration = Histogram(
        "gpufabric_webhook_admission_duration_seconds",
        "time",
        buckets=ADMISSION_BUCKETS,
        registry=registry,
    )
    for outcome, seconds in REVIEWS:
        ours.admissions.count(outcome, seconds)
        outcomes.labels(outcome=outcome).inc()
        if seconds is not None:
            duration.observe(seconds)
    got, want = generate_latest(ours.registry).decode(), generate_latest(registry).decode()
    for name in ("gpufabric_webhook_admissions", "gpufabric_webhook_admission_duration_seconds"):
        assert sorted(_samples(got, name)) == sorted(_samples(want, name)), name
    assert 'gpufabric_webhook_admission_duration_seconds_bucket{le="0.0005"} 2.0' in got
    assert 'gpufabric_webhook_admissions_total{outcome="mutated"} 3.0' in got
