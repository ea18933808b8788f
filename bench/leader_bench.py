"""Leader election failover, cache catch-up after an outage, and relabel of a re-created Node.

Failover and catch-up run on a fake clock (the same simulations the tests use; times are the
protocol's, not this machine's). Catch-up is compared with the backoff before issue 11 (30 s cap,
x0.5-1.5 jitter), drawn in the same process. Relabel is wall-clock: the labeler's worker thread
reacting to a Node ADDED event from the Node watch, against the SSA-like fake Nodes.
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common.backoff import Backoff
from tests.webhook.election_sim import Cluster
from tests.webhook.helpers import golden_statuses
from tests.webhook.node_fakes import NodeServer
from webhook.kube.watch import PROBE_BACKOFF
from webhook.labeler.nodes import Labeler


def failover(kills: int) -> None:
    times = []
    for i in range(kills):
        c = Cluster()
        a = c.add("a")
        c.add("b")
        c.run_until(20 + 2.0 * i / kills)  # every phase of the 2 s renew cycle
        killed = c.clock.monotonic()
        a.kill()
        c.run_until(60)
        b = c.leader()
        assert b is not None
        times.append(b.intervals[0][0] - killed)
        c.assert_one_leader_at_a_time()
    c = Cluster()
    a = c.add("a")
    b = c.add("b")
    c.run_until(20)
    a.elector.release()
    a.alive = False
    released = c.clock.monotonic()
    c.run_until(40)
    handover = b.intervals[0][0] - released
    print(
        f"failover after a killed leader (lease 15 s, {kills} kill phases): "
        f"min {min(times):.2f} s, mean {statistics.mean(times):.2f} s, max {max(times):.2f} s; "
        f"after a clean shutdown (Lease released): {handover:.2f} s"
    )
    c = Cluster()
    a = c.add("a", stop_delay=4.9)
    b = c.add("b")
    c.run_until(20)
    a.net.down = True
    c.run_until(60)
    gap = b.intervals[0][0] - a.intervals[0][1]
    print(
        f"cut-off leader whose worker takes 4.9 s to stop: it had stopped {gap:.2f} s before "
        "the other replica took the Lease"
    )


def catch_up(samples: int) -> None:
    def worst(backoff: Backoff, old_jitter: bool) -> tuple[float, float]:
        rng = random.Random(7)
        lags = []
        for _ in range(samples):
            back_at = rng.uniform(1, 120)
            t, failures = 0.0, 0
            while t < back_at:
                failures += 1
                if old_jitter:  # before issue 11: cap 30 s, then jitter x0.5-1.5 (up to 45 s)
                    raw = min(backoff.cap, backoff.base * 2 ** (failures - 1))
                    t += raw * rng.uniform(0.5, 1.5)
                else:
                    t += backoff.delay(failures, rng)
            lags.append(t - back_at)
        return statistics.mean(lags), max(lags)

    new_mean, new_max = worst(PROBE_BACKOFF, False)
    old_mean, old_max = worst(Backoff(base=0.5, cap=30.0), True)
    print(
        f"cache catch-up after an outage of 1-120 s ({samples} outages): mean {new_mean:.2f} s, "
        f"max {new_max:.2f} s (+ one list); before: mean {old_mean:.2f} s, max {old_max:.2f} s "
        f"({old_max / new_max:.1f}x longer worst case)"
    )


def relabel(rounds: int) -> None:
    status = dict(golden_statuses())["hgx-h100"]
    server = NodeServer({"gpu-1": {"kubernetes.io/hostname": "gpu-1"}})
    applied = threading.Event()
    labeler = Labeler(server, observe=lambda o: applied.set() if o == "applied" else None)
    labeler.statuses_listed([{"metadata": {"name": "gpu-1"}, "status": status}])
    labeler.nodes_listed(server.list_objects())
    stop = threading.Event()
    worker = threading.Thread(target=labeler.work, args=(stop,), daemon=True)
    worker.start()
    assert applied.wait(10)
    lags = []
    for _ in range(rounds):
        for kind, obj in server.pop_events():
            labeler.node_event(kind, obj)
        server.delete("gpu-1")
        server.create("gpu-1", {"kubernetes.io/hostname": "gpu-1"})
        applied.clear()
        events = server.pop_events()
        start = time.perf_counter()
        for kind, obj in events:
            labeler.node_event(kind, obj)
        assert applied.wait(10)
        lags.append(time.perf_counter() - start)
    stop.set()
    worker.join()
    print(
        f"re-created Node relabeled by the labeler {statistics.median(lags) * 1e3:.2f} ms "
        f"(median of {rounds}, max {max(lags) * 1e3:.2f} ms) after its ADDED event "
        "(+ Node watch delivery + one apply round trip)"
    )


def loopback_failover() -> None:
    """Two electors over real HTTP (KubeLeaseApi -> a Lease endpoint on 127.0.0.1 that answers
    like the captured apiserver: rv checks, 409s, MicroTime validation), real clock, 15 s lease."""
    import json
    import re
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from kubernetes import client

    from webhook.leader import Elector, LeaseError
    from webhook.leader.kube import KubeLeaseApi

    state: dict[str, object] = {"body": None, "rv": 100}
    lock = threading.Lock()
    micro = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            with lock:
                body = state["body"]
            if body is None:
                self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
            else:
                self._send(200, body)

        def _write(self, create: bool) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                current = state["body"]
                if create and current is not None:
                    return self._send(409, {"code": 409, "reason": "AlreadyExists"})
                if not create and (
                    current is None
                    or body["metadata"].get("resourceVersion")
                    != current["metadata"]["resourceVersion"]  # type: ignore[index]
                ):
                    return self._send(409, {"code": 409, "reason": "Conflict"})
                for key in ("acquireTime", "renewTime"):
                    if not micro.match(body["spec"].get(key, "")):
                        return self._send(400, {"code": 400, "message": f"bad {key}"})
                state["rv"] = int(state["rv"]) + 1  # type: ignore[call-overload]
                body["metadata"]["resourceVersion"] = str(state["rv"])
                state["body"] = body
            return self._send(201 if create else 200, body)

        def do_POST(self) -> None:
            self._write(True)

        def do_PUT(self) -> None:
            self._write(False)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{httpd.server_address[1]}"

    class Killable(KubeLeaseApi):
        dead = False

        def _call(self, method: str, path: str, body: object, timeout: float) -> tuple[int, object]:
            if self.dead:
                raise LeaseError("killed")
            return super()._call(method, path, body, timeout)

    started: dict[str, float] = {}

    def work_of(name: str):  # type: ignore[no-untyped-def]
        def work(stop: threading.Event) -> None:
            started[name] = time.monotonic()
            stop.wait()

        return work

    apis = {n: Killable(client.ApiClient(cfg), "gpufabric-system") for n in ("a", "b")}
    stops = {n: threading.Event() for n in ("a", "b")}
    electors = {n: Elector("gpufabric-labeler", n, apis[n], work_of(n)) for n in ("a", "b")}
    threads = {}
    for n in ("a", "b"):
        threads[n] = threading.Thread(target=electors[n].run, args=(stops[n],), daemon=True)
        threads[n].start()
        time.sleep(0.5)
    deadline = time.monotonic() + 10
    while "a" not in started and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(3.3)  # some renewals
    killed = time.monotonic()
    apis["a"].dead = True  # its requests fail from now on, like a dead process
    while "b" not in started and time.monotonic() < killed + 30:
        time.sleep(0.05)
    killed_failover = started["b"] - killed
    stops["a"].set()
    threads["a"].join(15)
    released = time.monotonic()
    stops["b"].set()
    threads["b"].join(15)
    release_s = time.monotonic() - released
    httpd.shutdown()
    print(
        f"loopback HTTP, real clock: failover after the leader died {killed_failover:.2f} s "
        f"(lease 15 s); shutdown released the Lease in {release_s:.2f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=40)
    parser.add_argument("--outages", type=int, default=20000)
    parser.add_argument("--relabels", type=int, default=200)
    parser.add_argument("--loopback", action="store_true", help="also ~20 s over real HTTP")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the simulated outages' warnings are expected
    failover(args.kills)
    catch_up(args.outages)
    relabel(args.relabels)
    if args.loopback:
        loopback_failover()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
