"""Free GPUs and fragmentation per level, published at most every few seconds (read from the
placer's per-domain tallies: a pass over the domains, not the nodes)."""

from __future__ import annotations

import time
from collections.abc import Callable

from webhook.groups.placer.placer import Placer
from webhook.server.metrics import WebhookMetrics


def publish(metrics: WebhookMetrics, placer: Placer) -> None:
    view = placer.view
    for level in view.levels():
        metrics.group_free_gpus.labels(level=level).set(view.free_at(level))
        metrics.group_fragmentation.labels(level=level).set(view.fragmentation(level))
    metrics.group_waiting.set(len(placer.waiting))
    by_priority: dict[int, int] = {}
    for _, priority in placer.waiting_order():
        by_priority[priority] = by_priority.get(priority, 0) + 1
    metrics.group_waiting_priority.clear()  # a priority no group waits at any more goes away
    for priority, count in by_priority.items():
        metrics.group_waiting_priority.labels(priority=str(priority)).set(count)


def gauges_every(metrics: WebhookMetrics, seconds: float) -> Callable[[Placer], None]:
    last = [0.0]

    def maybe(placer: Placer) -> None:
        now = time.monotonic()
        if now - last[0] >= seconds:
            last[0] = now
            publish(metrics, placer)

    return maybe
