"""The daemon loop: no writes in steady state, one write per change, no update lost in an outage."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agent.assemble import Assembled, Options
from agent.gather import open_snapshot
from agent.host import HostReader
from agent.nvml import SnapshotNvml
from agent.probe import ProbeConfig, probe_node
from agent.publish import RecordingPublisher
from agent.runner import Agent
from agent.udev import QueueSource
from common.backoff import Backoff
from tests.conftest import FIXTURES


@pytest.fixture
def host(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    snap = open_snapshot(FIXTURES / "hgx-h100.tar.gz", tmp_path)
    return snap.root, snap.nvml


def make_agent(root: Path, nvml: dict[str, object], publisher: RecordingPublisher) -> Agent:
    reader = HostReader(root)

    def prober(opts: Options) -> Assembled:
        return probe_node(reader, SnapshotNvml(nvml), ProbeConfig(), opts)  # type: ignore[arg-type]

    ticks = iter(f"2026-01-01T00:{m // 60:02d}:{m % 60:02d}Z" for m in range(100_000))
    return Agent("node-a", prober, publisher, clock=lambda: next(ticks), rng=random.Random(1))


def take_port_down(root: Path, hca: str) -> None:
    port = root / "sys/class/infiniband" / hca / "ports/1"
    (port / "state").write_text("1: DOWN\n")
    (port / "phys_state").write_text("2: Polling\n")


def test_unchanged_node_writes_once_then_never(host: tuple[Path, dict[str, object]]) -> None:
    publisher = RecordingPublisher()
    agent = make_agent(*host, publisher)
    for _ in range(200):
        assert agent.cycle("resync")
    assert len(publisher.applied) == 1


def test_port_going_down_is_one_write_with_a_new_transition_time(
    host: tuple[Path, dict[str, object]],
) -> None:
    publisher = RecordingPublisher()
    agent = make_agent(*host, publisher)
    agent.cycle("start")
    take_port_down(host[0], "mlx5_4")
    for _ in range(5):
        agent.cycle("udev")
    assert len(publisher.applied) == 2
    after = publisher.applied[-1][1]
    assert after["summary"]["fabricHealth"] == "degraded"
    conds = {c["type"]: c for c in after["conditions"]}
    before = {c["type"]: c for c in publisher.applied[0][1]["conditions"]}
    assert (
        conds["FabricHealthy"]["lastTransitionTime"]
        != before["FabricHealthy"]["lastTransitionTime"]
    )
    assert (
        conds["NvmlAvailable"]["lastTransitionTime"]
        == before["NvmlAvailable"]["lastTransitionTime"]
    )


def test_restart_adopts_the_servers_copy_and_writes_nothing(
    host: tuple[Path, dict[str, object]],
) -> None:
    publisher = RecordingPublisher()
    first = make_agent(*host, publisher)
    first.adopt_existing()  # as run_forever does: it also learns the Node's uid
    first.cycle("start")
    again = make_agent(*host, publisher)
    again.adopt_existing()
    again.cycle("start")
    assert len(publisher.applied) == 1


def test_status_is_owned_by_its_node_and_an_unowned_one_is_adopted_once(
    host: tuple[Path, dict[str, object]],
) -> None:
    """Issue 7 item 7: the garbage collector removes a status only if its Node owns it."""
    publisher = RecordingPublisher()
    make_agent(*host, publisher).cycle("start")  # an agent that never read its Node (old one)
    assert publisher.owners["node-a"] is None
    again = make_agent(*host, publisher)
    again.adopt_existing()
    for _ in range(3):
        again.cycle("resync")
    assert publisher.owners["node-a"] == "uid-node-a"
    assert len(publisher.applied) == 2  # one more write, to add the owner; then none


def test_deleted_node_stops_publishing_and_a_recreated_node_gets_its_status_back(
    host: tuple[Path, dict[str, object]], caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 11: the agent of a deleted Node kept publishing; issue 7: its status lived on."""
    publisher = RecordingPublisher()
    agent = make_agent(*host, publisher)
    agent.adopt_existing()
    assert agent.cycle("start")
    agent.node_seen(None)  # Node DELETED on the watch
    publisher.collect("node-a")  # the garbage collector removes the status it owned
    take_port_down(host[0], "mlx5_4")  # even a real change is not published meanwhile
    for reason in ("udev", "resync", "resync"):
        assert agent.cycle(reason)
    assert len(publisher.applied) == 1 and "node-a" not in publisher.stored
    assert "node does not exist; not publishing until it does" in caplog.text
    agent.node_seen("uid-2")  # created again: a new uid
    assert agent.cycle("node")
    assert publisher.owners["node-a"] == "uid-2"
    assert publisher.stored["node-a"]["summary"]["rdmaPorts"] == 7
    assert agent.cycle("resync") and len(publisher.applied) == 2


def test_outage_loses_no_update(host: tuple[Path, dict[str, object]]) -> None:
    publisher = RecordingPublisher()
    agent = make_agent(*host, publisher)
    publisher.fail_next = 3
    assert not agent.cycle("start")
    take_port_down(host[0], "mlx5_0")
    assert not agent.cycle("retry")
    assert not agent.cycle("retry")
    assert agent.failures == 3
    assert agent.cycle("retry")
    assert len(publisher.applied) == 1
    assert "mlx5_0" not in publisher.applied[0][1]["summary"]["usableHcas"]


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    b, rng = Backoff(base=1, cap=60), random.Random(0)
    delays = [b.delay(n, rng) for n in range(1, 12)]
    assert 0.5 <= delays[0] <= 1.5
    assert delays[4] > delays[0]
    assert max(delays) <= 90


async def test_udev_storm_is_one_reprobe_and_stop_ends_the_loop(
    host: tuple[Path, dict[str, object]],
) -> None:
    publisher = RecordingPublisher()
    agent = make_agent(*host, publisher)
    cycles: list[str] = []
    real = agent.cycle

    def counting(reason: str) -> bool:
        cycles.append(reason)
        return real(reason)

    agent.cycle = counting  # type: ignore[method-assign]
    source, stop = QueueSource(), asyncio.Event()
    task = asyncio.create_task(agent.run(source, stop, resync=3600, debounce=0.05))
    await asyncio.sleep(0.2)
    take_port_down(host[0], "mlx5_5")
    for i in range(500):
        source.emit(f"change infiniband mlx5_{i % 8}")
    await asyncio.sleep(0.6)
    stop.set()
    await asyncio.wait_for(task, 2)
    assert cycles == ["start", "udev"]
    assert len(publisher.applied) == 2


async def test_failed_apply_is_retried_by_the_loop(host: tuple[Path, dict[str, object]]) -> None:
    publisher = RecordingPublisher()
    publisher.fail_next = 2
    agent = make_agent(*host, publisher)
    agent.backoff = replace(agent.backoff, base=0.01, cap=0.02)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(QueueSource(), stop, resync=3600, debounce=0.01))
    for _ in range(100):
        await asyncio.sleep(0.02)
        if publisher.applied:
            break
    stop.set()
    await asyncio.wait_for(task, 2)
    assert len(publisher.applied) == 1


def test_kube_publisher_turns_a_refusing_or_hung_api_server_into_publish_error() -> None:
    import socket
    import threading
    import time

    from kubernetes import client

    from agent.kube import KubePublisher
    from agent.publish import PublishError

    def publisher(port: int) -> KubePublisher:
        cfg = client.Configuration()
        cfg.host = f"http://127.0.0.1:{port}"
        return KubePublisher(client.ApiClient(cfg), timeout=0.5)

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        closed_port = free.getsockname()[1]
    with pytest.raises(PublishError, match="discovery failed"):
        publisher(closed_port).apply("n", {})

    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(hung.accept()[0]), daemon=True).start()
    started = time.monotonic()
    with pytest.raises(PublishError):
        publisher(hung.getsockname()[1]).current("n")
    assert time.monotonic() - started < 5
    hung.close()
    for s in accepted:
        s.close()


def test_kube_publisher_sets_the_owner_before_the_status_and_recreates_a_collected_object() -> None:
    from kubernetes import client
    from kubernetes.dynamic.exceptions import NotFoundError

    from agent.kube import KubePublisher

    calls: list[tuple[str, dict[str, Any]]] = []
    exists = {"node-a": True}

    class Endpoint:
        def __init__(self, sub: str) -> None:
            self.sub = sub

        def server_side_apply(self, body: dict[str, Any], **kw: Any) -> None:
            if self.sub == "status" and not exists["node-a"]:
                raise NotFoundError(type("E", (), {"status": 404, "reason": "NotFound"})())
            exists["node-a"] = True
            calls.append((self.sub, body))

    class Resource(Endpoint):
        status = Endpoint("status")

    publisher = KubePublisher(client.ApiClient())
    publisher._resource = Resource("object")
    publisher.apply("node-a", {"summary": {}}, owner="uid-1")
    publisher.apply(
        "node-a", {"summary": {"gpuCount": 8}}, owner="uid-1"
    )  # owner known: status only
    exists["node-a"] = False  # the Node was deleted and the collector removed the status
    publisher.apply("node-a", {"summary": {}}, owner="uid-2")
    assert [sub for sub, _ in calls] == ["object", "status", "status", "object", "status"]
    ref = calls[3][1]["metadata"]["ownerReferences"]
    assert ref == [{"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": "uid-2"}]
