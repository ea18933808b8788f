"""The node daemon: probe at start, on udev events (debounced) and every resync; publish on change.

Nothing is sent while the status is byte-identical to what the API server last accepted. A failed
apply is retried with exponential backoff and jitter, always with the newest status, so an outage
loses no update.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import threading
import time
from collections.abc import Callable

from agent.assemble import Assembled, Options
from agent.config import RunConfig
from agent.host import HostReader
from agent.metrics import AgentMetrics, Health, serve
from agent.nvml import NvmlBackend
from agent.output import canonical_json
from agent.probe import ProbeConfig, probe_node, utc_now
from agent.publish import Publisher, PublishError
from agent.udev import EventSource, QueueSource
from common.backoff import Backoff
from common.model import Condition, NodeStatus

log = logging.getLogger(__name__)

Prober = Callable[[Options], Assembled]
DEFAULT_BACKOFF = Backoff()
UNKNOWN = "<unknown>"  # the Node's uid before the API server has told us


class Agent:
    def __init__(
        self,
        node: str,
        prober: Prober,
        publisher: Publisher,
        metrics: AgentMetrics | None = None,
        *,
        hca_exclude: tuple[str, ...] = (),
        hca_include: tuple[str, ...] = (),
        clock: Callable[[], str] = utc_now,
        backoff: Backoff = DEFAULT_BACKOFF,
        rng: random.Random | None = None,
    ) -> None:
        self.node = node
        self.prober = prober
        self.publisher = publisher
        self.metrics = metrics or AgentMetrics()
        self.hca_exclude = hca_exclude
        self.hca_include = hca_include
        self.clock = clock
        self.backoff = backoff
        self.rng = rng or random.Random()  # noqa: S311 - jitter, not security
        self.previous: dict[str, Condition] = {}
        self.published: str | None = None  # canonical JSON the API server holds
        self.published_for: str | None = UNKNOWN  # the Node uid that copy is owned by
        self.node_uid: str | None = UNKNOWN  # None: the Node does not exist (do not publish)
        self.failures = 0
        self._queue: asyncio.Queue[str] | None = None

    def node_seen(self, uid: str | None) -> bool:
        """What the Node watch (or a read) says: its uid, or None once it is deleted. A status
        is owned by its Node, so the garbage collector deletes it with the Node; while the Node
        is gone nothing is published, and a Node created again gets the status re-created."""
        if uid == self.node_uid:
            return False
        if uid is None:
            log.warning(
                "node does not exist; not publishing until it does", extra={"node": self.node}
            )
        elif self.node_uid is None:
            log.info("node exists again; publishing", extra={"node": self.node, "uid": uid})
        self.node_uid = uid
        return True

    def node_event(self, uid: str | None) -> None:
        """From the Node watch, on the event loop: a changed Node triggers a cycle."""
        if self.node_seen(uid) and self._queue is not None:
            self._queue.put_nowait("node")

    def adopt_existing(self) -> None:
        """Take the API server's copy as the starting point, so a restart writes nothing new."""
        try:
            self.node_seen(self.publisher.node_uid(self.node))
        except PublishError as err:
            log.warning("cannot read the Node; its watch will tell", extra={"error": str(err)})
        try:
            existing = self.publisher.current(self.node)
            owner = self.publisher.owner_of(self.node) if existing else UNKNOWN
        except PublishError as err:
            log.warning("cannot read existing status", extra={"error": str(err)})
            return
        if not existing:
            return
        try:
            status = NodeStatus.from_dict(existing)
        except ValueError as err:
            log.warning("existing status unreadable, will overwrite", extra={"error": str(err)})
            return
        self.previous = {c.type: c for c in status.conditions}
        self.published = canonical_json(status.to_dict())
        self.published_for = owner

    def cycle(self, reason: str) -> bool:
        """Probe and publish if changed. Returns False when the publish failed (retry later)."""
        owner = self.node_uid
        if owner is None:
            self.metrics.applies.labels(outcome="no-node").inc()
            return True
        started = time.perf_counter()
        result = self.prober(
            Options(
                now=self.clock(),
                previous=self.previous,
                hca_exclude=self.hca_exclude,
                hca_include=self.hca_include,
            )
        )
        self.metrics.probe_seconds.observe(time.perf_counter() - started)
        status = result.status
        self.previous = {c.type: c for c in status.conditions}
        self.metrics.observe_status(status)
        body = status.to_dict()
        text = canonical_json(body)
        if text == self.published and owner == self.published_for:
            self.metrics.applies.labels(outcome="unchanged").inc()
            self.metrics.last_success.set(time.time())
            self.failures = 0
            return True
        try:
            self.publisher.apply(self.node, body, None if owner == UNKNOWN else owner)
        except PublishError as err:
            self.failures += 1
            self.metrics.applies.labels(outcome="failed").inc()
            log.warning("apply failed", extra={"error": str(err), "failures": self.failures})
            return False
        self.published, self.published_for = text, owner
        self.failures = 0
        self.metrics.applies.labels(outcome="applied").inc()
        self.metrics.last_success.set(time.time())
        log.info(
            "status applied",
            extra={"node": self.node, "reason": reason, "health": status.summary.fabric_health},
        )
        return True

    async def run(
        self,
        events: EventSource,
        stop: asyncio.Event,
        *,
        resync: float,
        debounce: float,
        health: Health | None = None,
    ) -> None:
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._queue = queue

        async def pump() -> None:
            async for event in events.events():
                self.metrics.events.inc()
                queue.put_nowait(event)

        pump_task = asyncio.create_task(pump())
        reason = "start"
        try:
            while not stop.is_set():
                ok = await asyncio.to_thread(self.cycle, reason)
                if health is not None:
                    health.beat()
                wait = resync if ok else self.backoff.delay(self.failures, self.rng)
                reason = await self._wait(queue, stop, wait, debounce)
        finally:
            pump_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump_task

    async def _wait(
        self, queue: asyncio.Queue[str], stop: asyncio.Event, wait_s: float, debounce: float
    ) -> str:
        """Block until stop, a timeout ('resync'/'retry') or a burst of events has gone quiet."""
        get = asyncio.ensure_future(queue.get())
        stopper = asyncio.ensure_future(stop.wait())
        done, _ = await asyncio.wait({get, stopper}, timeout=wait_s, return_when="FIRST_COMPLETED")
        for task in (get, stopper):
            if task not in done:
                task.cancel()
        if get not in done:
            return "stop" if stopper in done else ("resync" if self.failures == 0 else "retry")
        first = get.result()
        if first == "node":
            return "node"  # the Node came or went: no hardware burst to wait out
        # Debounce: wait until no event arrived for `debounce` seconds (a udev storm is one probe),
        # but never longer than 10x debounce so a flapping device cannot starve the re-probe.
        deadline = time.monotonic() + 10 * debounce
        count = 1
        while time.monotonic() < deadline and not stop.is_set():
            try:
                await asyncio.wait_for(queue.get(), timeout=debounce)
                count += 1
            except TimeoutError:
                break
        log.info("hardware events", extra={"first": first, "count": count})
        return "udev"


async def run_forever(config: RunConfig, nvml: NvmlBackend) -> int:
    from agent.kube import KubePublisher, watch_node
    from common.kube import load_api_client

    reader = HostReader(config.host_root)
    probe_cfg = ProbeConfig(
        nccl_topo=config.nccl_topo,
        cufile_env_path=config.cufile_env_path,
        hca_exclude=config.hca_exclude,
        hca_include=config.hca_include,
    )

    def prober(opts: Options) -> Assembled:
        return probe_node(reader, nvml, probe_cfg, opts)

    metrics = AgentMetrics()
    health = Health(max_age=max(60.0, 3 * config.resync_seconds))
    server = serve(config.metrics_port, metrics, health)
    api_client = load_api_client(config.kubeconfig)
    # urllib3 logs every connection retry at WARNING; the agent logs failed applies itself.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    publisher = KubePublisher(api_client)
    agent = Agent(
        config.node_name,
        prober,
        publisher,
        metrics,
        hca_exclude=config.hca_exclude,
        hca_include=config.hca_include,
    )
    await asyncio.to_thread(agent.adopt_existing)

    events: EventSource = QueueSource()
    if config.udev:
        try:
            from agent.udev import PyudevSource

            events = PyudevSource()
        except Exception as err:  # noqa: BLE001 - no udev in this container: resync still works
            log.warning("udev unavailable; relying on --resync", extra={"error": str(err)})

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    node_stop = threading.Event()
    threading.Thread(
        target=watch_node,
        args=(
            api_client,
            config.node_name,
            lambda uid: loop.call_soon_threadsafe(agent.node_event, uid),
            node_stop,
        ),
        name="node-watch",
        daemon=True,
    ).start()
    log.info(
        "agent started",
        extra={
            "node": config.node_name,
            "resync": config.resync_seconds,
            "port": config.metrics_port,
        },
    )
    await agent.run(
        events, stop, resync=config.resync_seconds, debounce=config.debounce_seconds, health=health
    )
    node_stop.set()
    if server is not None:
        server.shutdown()
    log.info("agent stopped")
    return 0
