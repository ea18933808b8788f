"""Prometheus metrics of the webhook and the labeler."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

ADMISSION_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1)


class Admissions(Collector):
    """The per-review metrics: answers by outcome, and the server time of each review.

    Counted in plain ints and read at scrape time: prometheus_client's Counter and Histogram take
    a lock per increment and walk the buckets in Python, 1.5 us per review, a tenth of what the
    webhook adds to a review. Every review is counted on the event loop's thread.
    """

    def __init__(self) -> None:
        self.outcomes: dict[str, int] = {}
        self.buckets = [0] * (len(ADMISSION_BUCKETS) + 1)  # the last one: above every bound
        self.seconds = 0.0

    def count(self, outcome: str, seconds: float | None = None) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if seconds is not None:
            self.buckets[bisect_left(ADMISSION_BUCKETS, seconds)] += 1  # `le`: bound >= seconds
            self.seconds += seconds

    def collect(self) -> Iterator[Metric]:
        answers = CounterMetricFamily(
            "gpufabric_webhook_admissions",
            "Admission answers by outcome (mutated, untouched, denied, warned, bad_request, error)",
            labels=["outcome"],
        )
        for outcome, n in sorted(self.outcomes.items()):
            answers.add_metric([outcome], n)
        yield answers
        cumulative, total = [], 0
        bounds = (*map(floatToGoString, ADMISSION_BUCKETS), "+Inf")
        for bound, n in zip(bounds, self.buckets, strict=True):
            total += n
            cumulative.append((bound, total))
        yield HistogramMetricFamily(
            "gpufabric_webhook_admission_duration_seconds",
            "Server time to answer one AdmissionReview",
            buckets=cumulative,
            sum_value=self.seconds,
        )


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.admissions = Admissions()
        r.register(self.admissions)
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
        self.reader_fallbacks = Counter(
            "gpufabric_topology_reader_fallbacks_total",
            "ibnetdiscover dumps read line by line instead of column-wise (~5x the CPU): "
            "declined (not ibnetdiscover's own layout) or failed (a fault, logged)",
            ["reason"],
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
        self.group_waiting_priority = Gauge(
            "gpufabric_group_waiting_by_priority",
            "Waiting groups by their priority (spec.priority of their members)",
            ["priority"],
            registry=r,
        )
        self.group_preemptions = Counter(
            "gpufabric_group_preemptions_total",
            "Preemptions started for waiting groups (one domain each)",
            registry=r,
        )
        self.group_preempted_pods = Counter(
            "gpufabric_group_preempted_pods_total",
            "Pods the placer evicted to free a domain for a higher-priority group",
            registry=r,
        )
        self.group_preempted_gpus = Counter(
            "gpufabric_group_preempted_gpus_total",
            "GPUs freed by those evictions",
            registry=r,
        )
        self.placer_refused = Counter(
            "gpufabric_placer_refused_writes_total",
            "Writes of the group placer the API server refused (any 4xx), by write "
            "(pods/patch, pods/patch-dry-run, podgroups/create, computedomains/create) and code",
            ["write", "code"],
            registry=r,
        )
        self.placer_leader = Gauge(
            "gpufabric_placer_is_leader",
            "1 while this replica holds the placer Lease",
            registry=r,
        )
        self.compute_domains = Counter(
            "gpufabric_compute_domains_total",
            "ComputeDomains the placer made for groups (action=created) and deleted after their "
            "last member (action=deleted)",
            ["action"],
            registry=r,
        )
        self.compute_domains_left_over = Gauge(
            "gpufabric_compute_domains_left_over",
            "The placer's ComputeDomains whose group has no pod left, not deleted yet",
            registry=r,
        )
        self.group_partly_bound = Gauge(
            "gpufabric_group_partly_bound",
            "Groups with ungated members still unbound 60 s after ungating while others are bound",
            registry=r,
        )
        self.group_bind = Histogram(
            "gpufabric_group_bind_seconds",
            "Time from a group's ungating to kube-scheduler having bound all its members",
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
            registry=r,
        )

    def decided(self, level: str, outcome: str, seconds: float) -> None:
        self.group_decisions.labels(level=level, outcome=outcome).inc()
        self.group_decision_duration.observe(seconds)

    def ungated(self, gated_seconds: float, recovery: bool) -> None:
        (self.group_recovery if recovery else self.group_gated).observe(gated_seconds)

    def domain_made(self, created: int, deleted: int) -> None:
        self.compute_domains.labels(action="created").inc(created)
        self.compute_domains.labels(action="deleted").inc(deleted)

    def domains_left_over(self, count: int) -> None:
        self.compute_domains_left_over.set(count)

    def partly_bound(self, groups: int) -> None:
        self.group_partly_bound.set(groups)

    def all_bound(self, seconds: float) -> None:
        self.group_bind.observe(seconds)

    def refused(self, write: str, code: int) -> None:
        self.placer_refused.labels(write=write, code=str(code)).inc()

    def preempted(self, plans: int, pods: int, gpus: int) -> None:
        self.group_preemptions.inc(plans)
        self.group_preempted_pods.inc(pods)
        self.group_preempted_gpus.inc(gpus)
