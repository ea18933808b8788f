"""Prometheus metrics of the webhook and the labeler."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.duration = Histogram(
            "gpufabric_webhook_admission_duration_seconds",
            "Server time to answer one AdmissionReview",
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1),
            registry=r,
        )
        self.outcomes = Counter(
            "gpufabric_webhook_admissions_total",
            "Admission answers by outcome (mutated, untouched, denied, warned, bad_request)",
            ["outcome"],
            registry=r,
        )
        self.cache_nodes = Gauge(
            "gpufabric_webhook_cache_nodes", "GpuNodeStatus objects in the cache", registry=r
        )
        self.cache_claims = Gauge(
            "gpufabric_webhook_cache_claims", "GpuClaims in the cache", registry=r
        )
        self.cache_age = Gauge(
            "gpufabric_webhook_cache_age_seconds",
            "Seconds since the cache last changed",
            registry=r,
        )
        self.labeler_applies = Counter(
            "gpufabric_labeler_applies_total",
            "Node label applies by outcome (applied, unchanged, removed, failed)",
            ["outcome"],
            registry=r,
        )
        self.labeler_leader = Gauge(
            "gpufabric_labeler_is_leader",
            "1 while this replica holds the labeler Lease",
            registry=r,
        )
