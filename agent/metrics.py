"""Prometheus metrics of the agent and the /metrics + /healthz HTTP endpoint."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from common.model import NodeStatus


class AgentMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.gpus = Gauge("gpufabric_agent_gpus", "GPUs seen on this node", registry=r)
        self.hcas = Gauge("gpufabric_agent_hcas", "RDMA devices seen", registry=r)
        self.rdma_ports = Gauge(
            "gpufabric_agent_rdma_ports_usable",
            "ACTIVE ports usable for GPUDirect RDMA",
            registry=r,
        )
        self.island = Gauge(
            "gpufabric_agent_nvlink_island_size", "GPUs in the largest NVLink island", registry=r
        )
        self.nvme = Gauge("gpufabric_agent_nvme_drives", "NVMe controllers seen", registry=r)
        self.condition = Gauge(
            "gpufabric_agent_condition", "1 when the condition is True", ["type"], registry=r
        )
        self.probe_seconds = Histogram(
            "gpufabric_agent_probe_duration_seconds",
            "Time to probe the node and assemble the status",
            buckets=(0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=r,
        )
        self.applies = Counter(
            "gpufabric_agent_apply_total",
            "Status publications by outcome (applied, unchanged, failed)",
            ["outcome"],
            registry=r,
        )
        self.last_success = Gauge(
            "gpufabric_agent_last_apply_success_timestamp_seconds",
            "Unix time the API server last accepted (or already had) this node's status",
            registry=r,
        )
        self.events = Counter(
            "gpufabric_agent_udev_events_total", "udev events received", registry=r
        )

    def observe_status(self, status: NodeStatus) -> None:
        self.gpus.set(status.summary.gpu_count)
        self.hcas.set(len(status.hcas))
        self.rdma_ports.set(status.summary.rdma_ports)
        self.island.set(status.summary.nvlink_island_size)
        self.nvme.set(len(status.gpudirect.storage.nvme_peers))
        for cond in status.conditions:
            self.condition.labels(type=cond.type).set(1 if cond.status == "True" else 0)


class Health:
    """Healthy while the main loop has completed a cycle within `max_age` seconds."""

    def __init__(self, max_age: float) -> None:
        self.max_age = max_age
        self.last_cycle = time.monotonic()

    def beat(self) -> None:
        self.last_cycle = time.monotonic()

    def ok(self) -> bool:
        return time.monotonic() - self.last_cycle <= self.max_age


def serve(port: int, metrics: AgentMetrics, health: Health) -> ThreadingHTTPServer | None:
    """Serve /metrics and /healthz on `port` in a thread; port 0 means no endpoint (None)."""
    if port == 0:
        return None

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                body, code, ctype = generate_latest(metrics.registry), 200, CONTENT_TYPE_LATEST
            elif self.path.startswith("/healthz"):
                ok = health.ok()
                body, code, ctype = (
                    (b"ok\n" if ok else b"stalled\n"),
                    200 if ok else 503,
                    "text/plain",
                )
            else:
                body, code, ctype = b"not found\n", 404, "text/plain"
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)  # noqa: S104 - scraped by Prometheus
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
