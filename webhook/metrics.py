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
            "Admission answers by outcome (mutated, untouched, denied, warned, bad_request, error)",
            ["outcome"],
            registry=r,
        )
        self._outcome_children: dict[str, Counter] = {}
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
        self.watch_stale = Gauge(
            "gpufabric_webhook_watch_stale_seconds",
            "0 while the watch is connected; else seconds since it last heard from the API "
            "server (the cache keeps serving its last good state meanwhile)",
            ["watch"],
            registry=r,
        )
        self.leader = Gauge(
            "gpufabric_webhook_is_leader",
            "1 while this replica holds the Lease (gpufabric-labeler, gpufabric-placer)",
            ["lease"],
            registry=r,
        )
        self.labeler_leader = Gauge(
            "gpufabric_labeler_is_leader",
            "1 while this replica holds the labeler Lease",
            registry=r,
        )
        # Group placer (webhook/groups; docs/metrics.md "Group placement").
        self.group_decisions = Counter(
            "gpufabric_group_decisions_total",
            "Group placement decisions by level and outcome "
            "(placed, spread, recovered, moved, waiting)",
            ["level", "outcome"],
            registry=r,
        )
        self.group_decision_duration = Histogram(
            "gpufabric_group_decision_duration_seconds",
            "Time to decide one group's domain",
            buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5),
            registry=r,
        )
        self.group_gated = Histogram(
            "gpufabric_group_gated_seconds",
            "Time a group member waited gated, from first seen to ungated",
            buckets=(0.1, 0.5, 1, 5, 30, 120, 600, 3600, 21600),
            registry=r,
        )
        self.group_recovery = Histogram(
            "gpufabric_group_recovery_seconds",
            "Time from a replacement member of a placed group being seen to it being ungated",
            buckets=(0.1, 0.5, 1, 5, 30, 120, 600, 3600),
            registry=r,
        )
        self.group_free_gpus = Gauge(
            "gpufabric_group_free_gpus",
            "Free GPUs on usable nodes that carry the level's network label",
            ["level"],
            registry=r,
        )
        self.group_fragmentation = Gauge(
            "gpufabric_group_fragmentation_ratio",
            "Share of free GPUs in domains of the level that are not entirely free",
            ["level"],
            registry=r,
        )
        self.group_waiting = Gauge(
            "gpufabric_group_waiting",
            "Groups with gated members the placer cannot place yet",
            registry=r,
        )
        self.placer_leader = Gauge(
            "gpufabric_placer_is_leader",
            "1 while this replica holds the placer Lease",
            registry=r,
        )

    def outcome(self, name: str) -> Counter:
        """The admissions counter of one outcome (labels() validates and locks on every call;
        the webhook counts every review)."""
        child = self._outcome_children.get(name)
        if child is None:
            child = self._outcome_children[name] = self.outcomes.labels(outcome=name)
        return child

    def decided(self, level: str, outcome: str, seconds: float) -> None:
        self.group_decisions.labels(level=level, outcome=outcome).inc()
        self.group_decision_duration.observe(seconds)

    def ungated(self, gated_seconds: float, recovery: bool) -> None:
        (self.group_recovery if recovery else self.group_gated).observe(gated_seconds)
