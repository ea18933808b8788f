#!/usr/bin/env python3
"""Bursts of gangs on a real control plane: gpufabric against kube-scheduler's own gang scheduling.

    .venv/bin/python bench/bind_bench.py [--rounds 3] [--shapes full,half] [--seed 1]

Two Kubernetes 1.36.2 control planes (../shared/tools/k8s on free ports; no kubelet, so placed =
bound), each with 128 8-GPU Node objects in 16 leaves of 8 under 2 spines (topology from ConfigMap
gpufabric-topology) and gpufabric installed as the end-to-end tier installs it, `serve --labeler
--placer` running as the webhook's ServiceAccount (bench/realcluster.py on tests/e2e's harness).
One serves PodGroups (GenericWorkload, GangScheduling, TopologyAwareWorkloadScheduling on the API
server, the scheduler and the controller manager, which also runs podgroup-protection), one does
not. Each round runs, in rotating order, the same shuffled burst three
ways: gpufabric where PodGroups are served (its members are also a native gang), gpufabric where
they are not, and kube-scheduler's own gang (one PodGroup per gang, `gang.minCount` = its size,
`schedulingConstraints.topology` on the gang's gpufabric.io level label; on the served plane).

Bursts (one 8-GPU pod a node, bare pods, gangs created 8 at a time, each gang's objects in order):
`full`: 19 gangs of 2-32 nodes = all 128 nodes (8 x 2, 4 x 4, 4 x 8 at leaf, 2 x 16 at leaf-pair,
1 x 32 at leaf-quad), shuffled; `half`: 16 gangs of 2-8 nodes = 64 nodes (leaf); `gang`: one gang
of 8 (leaf), the plane otherwise at rest (what each way adds to one gang's time when the CPU is
not the bound, as on a machine with many cores). Per run: gangs placed (every member bound),
partly bound (some), split (bound across more than one domain of its
level), seconds from the first create to the last bind of a placed gang, and where each member's
time went (its CREATE, then created -> every member of its gang created -> ungated -> bound,
medians over members), with the mean time of one of our reviews as the API server saw it
(apiserver_admission_webhook_admission_duration_seconds) and inside serve, and the CPU seconds
the API server, etcd, kube-scheduler, kube-controller-manager, serve and the bench spent on the
run (their sum over the cores is a floor no run beats; the table gives it against native's); `-v`
adds each gang's timeline,
kube-scheduler's FailedScheduling messages and the API requests made, by verb and resource. The
ratio to native is given twice: of the medians, and the median (and range) of each round's run
against native's run of the same round (the machine is shared; its load drifts between rounds).
A run ends when every gang is bound, or 10 s after the last bind (60 s at most).
`--pprof S`: kube-apiserver's own CPU profile of each burst's first S seconds (its /debug/pprof,
read by bench/pprof.py without a Go toolchain), printed by what the CPU went to (TLS handshakes,
JSON, admission, the watch cache, ...; `-v`: the top functions too), kept in --logs if given.
`--sched-v 5`: kube-scheduler logs each pod-group cycle and each request its client-side rate
limit (50/s, burst 100) held back, kept with --logs.
After each run kube-scheduler is asked (SIGUSR2) for pods its cache holds that the API server no
longer has, and restarted where it holds any: 1.36.2 keeps a gang member deleted during its binding
cycle on its node for good, and a later run's gang placed there would never bind (realcluster.py).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pprof
import realcluster
from bind_report import (
    BENCH_NS,
    Recorder,
    Result,
    Seen,
    api_metrics,
    cpu_seconds,
    metric_sums,
    print_unplaced,
    request_counts,
    request_seconds,
    result_of,
    table,
    timeline,
)
from kubernetes import client

from tests.e2e.pods import gpu_container  # realcluster put the repository on the path
from webhook.kube.client import let_go

HALF = [(2, "leaf")] * 8 + [(4, "leaf")] * 4 + [(8, "leaf")] * 4  # 64 nodes, 16 gangs
SHAPES = {
    "full": [*HALF, (16, "leaf-pair"), (16, "leaf-pair"), (32, "leaf-quad")],
    "half": HALF,
    "gang": [(8, "leaf")],  # one gang on a plane at rest: the latency chain, not the CPU
}
SETTLE = 10.0  # seconds with no new bind before a run that is not all bound ends
LONGEST = 60.0
SHORT = {"gpufabric-served": "gs", "gpufabric-unserved": "gu", "native": "nt"}


def pod_body(name: str, gang: str, size: int, level: str, native: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"bench-gang": gang}}
    spec: dict[str, Any] = {
        "containers": [gpu_container(8)],
        "terminationGracePeriodSeconds": 0,
    }
    if native:
        spec["schedulingGroup"] = {"podGroupName": gang}
    else:
        meta["annotations"] = {
            "gpufabric.io/group": gang,
            "gpufabric.io/group-size": str(size),
            "gpufabric.io/group-locality": "required",
            "gpufabric.io/group-level": level,
        }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def podgroup_body(gang: str, size: int, level: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": gang},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": size}},
            "schedulingConstraints": {"topology": [{"key": f"gpufabric.io/{level}"}]},
        },
    }


class Plane:
    """One cluster as the bench drives it."""

    def __init__(self, made: realcluster.Installed) -> None:
        cluster = made.cluster
        self.cluster, self.webhook = cluster, made.webhook
        self.api = cluster.client()  # admin, verifying the plane's own CA
        self.api.configuration.connection_pool_maxsize = 16
        self.core = client.CoreV1Api(self.api)
        self.objects = client.CustomObjectsApi(self.api)
        self.rec = Recorder(self.api)
        self.verbose = False
        self.pprof = 0  # seconds of kube-apiserver CPU profile from each burst's start (0: none)
        self.profiles: dict[str, pprof.Top] = {}
        self.keep: Path | None = None  # where each profile is kept (--logs)
        cluster.kubectl("create", "namespace", BENCH_NS)
        threading.Thread(target=self.rec.run, daemon=True).start()
        self.pids = {
            c: int((cluster.state / f"{c}.pid").read_text()) for c in ("api", "etcd", "sched", "cm")
        }
        self.pids["serve"] = made.webhook.process.pid
        self.pids["bench"] = os.getpid()  # its pod watch and creates share the plane's cores
        self.level_of: dict[str, dict[str, str]] = {}
        self.restarts: list[str] = []  # runs after which kube-scheduler was restarted
        for n in self.core.list_node().items:
            self.level_of[n.metadata.name] = dict(n.metadata.labels or {})

    def burst(self, way: str, shape: str, seed: int, tag: str) -> Result:
        native = way == "native"
        gangs = list(SHAPES[shape])
        random.Random(seed).shuffle(gangs)
        names = [f"{tag}-g{i}" for i in range(len(gangs))]
        with self.rec.lock:
            self.rec.pods = {
                f"{g}-{m}": Seen(g)
                for g, (size, _) in zip(names, gangs, strict=True)
                for m in range(size)
            }
        cpu0, (adm0, req0, sec0) = self._cpu(), self._admission()
        profiling = None
        if self.pprof:
            profiling = threading.Thread(target=self._profile, args=(tag,), daemon=True)
            profiling.start()
        t0 = time.monotonic()

        def make(i: int) -> None:
            size, level = gangs[i]
            if native:
                body = podgroup_body(names[i], size, level)
                self.objects.create_namespaced_custom_object(
                    "scheduling.k8s.io", "v1alpha2", BENCH_NS, "podgroups", body
                )
            for m in range(size):
                pod = f"{names[i]}-{m}"
                asked = time.monotonic()
                let_go(  # the answer not decoded into a model: this process's CPU is the plane's
                    self.core.create_namespaced_pod(
                        BENCH_NS,
                        pod_body(pod, names[i], size, level, native),
                        _preload_content=False,
                    )
                )
                with self.rec.lock:
                    s = self.rec.pods[pod]
                    s.created = time.monotonic()
                    s.admission = s.created - asked
                    if native:
                        s.ungated = s.ungated or s.created

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(make, range(len(gangs))))
        made = time.monotonic() - t0
        last, count = time.monotonic(), 0
        while time.monotonic() - t0 < LONGEST:
            with self.rec.lock:
                bound = sum(1 for s in self.rec.pods.values() if s.bound)
                total = len(self.rec.pods)
            if bound == total:
                break
            if bound != count:
                last, count = time.monotonic(), bound
            elif bound and time.monotonic() - last > SETTLE:
                break
            time.sleep(0.05)
        with self.rec.lock:
            seen = dict(self.rec.pods)
        cpu1, (adm1, req1, sec1) = self._cpu(), self._admission()
        requests = {k: v - req0.get(k, 0.0) for k, v in req1.items() if v - req0.get(k, 0.0)}
        cpu = {k: cpu1[k] - cpu0[k] for k in cpu0}
        admission = {
            k: 1000 * (adm1[k][0] - adm0[k][0]) / max(adm1[k][1] - adm0[k][1], 1) for k in adm0
        }
        self._unplaced(names, gangs, seen)
        if self.verbose:
            self._failures()
        if profiling is not None:
            profiling.join()  # before the clean up, whose deletes would count too
        self._clean(native)
        self._exorcise(tag)
        if self.verbose:
            timeline(names, gangs, seen, t0, made)
        if self.verbose:
            took = {k: sec1.get(k, 0.0) - sec0.get(k, 0.0) for k in requests}
            print(
                "  API requests (mean ms each as the API server saw it):",
                ", ".join(
                    f"{k} {v:.0f} ({1000 * took[k] / v:.0f})" for k, v in sorted(requests.items())
                ),
            )
        return result_of(
            self.level_of, way, shape, gangs, names, seen, t0, cpu, admission, requests
        )

    def _unplaced(
        self, names: list[str], gangs: list[tuple[int, str]], seen: dict[str, Seen]
    ) -> None:
        """Each gang left not all bound: where each member stood when the run ended (its gate,
        node, nominated node, kube-scheduler's last word), read before the clean up."""
        left = [
            n
            for n, (size, _) in zip(names, gangs, strict=True)
            if sum(1 for s in seen.values() if s.gang == n and s.bound) < size
        ]
        if not left:
            return
        print_unplaced(left, self.core.list_namespaced_pod(BENCH_NS).items, self.level_of)

    def _exorcise(self, tag: str) -> None:
        """kube-scheduler restarted where its cache kept pods of this run that are gone (a
        1.36.2 bug, see realcluster.scheduler_ghosts): their nodes would stay full for it, and
        a later run's gang placed there would never bind, whichever way placed it."""
        try:
            ghosts = realcluster.scheduler_ghosts(self.cluster)
        except (OSError, ValueError) as err:  # its pid file or log unreadable, or it is gone
            print(
                f"  {tag}: kube-scheduler's cache could not be asked ({err}); goes on", flush=True
            )
            return
        if not ghosts:
            return
        print(
            f"  {tag}: kube-scheduler still holds {len(ghosts)} deleted pod(s) on their nodes "
            f"(its 'Cache mismatch ... redundantPods'): restarting it so later runs are not "
            "charged for them",
            flush=True,
        )
        self.restarts.append(tag)
        self.pids["sched"] = realcluster.restart_scheduler(self.cluster)

    def _podgroups(self) -> int:
        try:
            got = self.objects.list_namespaced_custom_object(
                "scheduling.k8s.io", "v1alpha2", BENCH_NS, "podgroups", limit=1
            )
        except client.ApiException:
            return 0  # not served on this plane
        return len(got.get("items") or [])

    def _profile(self, tag: str) -> None:
        """kube-apiserver's CPU profile of the burst (its /debug/pprof, on by default)."""
        method, url, headers, body, _ = self.api.param_serialize(
            "GET", f"/debug/pprof/profile?seconds={self.pprof}", auth_settings=["BearerToken"]
        )
        try:
            data = self.api.call_api(method, url, headers, body).read()
            self.profiles[tag] = pprof.read(data)
            if (
                self.keep is not None
            ):  # for a closer look: bench/pprof.py's table(), or go tool pprof
                (self.keep / f"{tag}.pprof.gz").write_bytes(data)
        except Exception as err:  # noqa: BLE001 - a bench's extra; said and left out
            print(f"  {tag}: no profile ({err})")

    def _cpu(self) -> dict[str, float]:
        return {c: cpu_seconds(pid) for c, pid in self.pids.items()}

    def _admission(
        self,
    ) -> tuple[dict[str, tuple[float, float]], dict[str, float], dict[str, float]]:
        """(sum, count) of the pod reviews' seconds: the API server's view of our webhook (the
        call, with its connection and TLS) and serve's own (from the body read to the answer)."""
        api = api_metrics(self.api)
        port = self.webhook.metrics_port
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                own = r.read().decode()
        except OSError:
            own = ""
        return (
            {
                "api": metric_sums(
                    api,
                    "apiserver_admission_webhook_admission_duration_seconds",
                    'operation="CREATE"',
                ),
                "serve": metric_sums(own, "gpufabric_webhook_admission_duration_seconds"),
            },
            request_counts(api),
            request_seconds(api),
        )

    def _failures(self) -> None:
        """kube-scheduler's FailedScheduling Events of the run, counted by message."""
        events = self.core.list_namespaced_event(BENCH_NS, field_selector="reason=FailedScheduling")
        said: dict[str, list[str]] = {}
        for e in events.items:
            said.setdefault(e.message, []).append(e.involved_object.name)
        for message, pods in said.items():
            print(f"  FailedScheduling x{len(pods)} ({', '.join(sorted(pods)[:4])}): {message}")
        self.core.delete_collection_namespaced_event(BENCH_NS)

    def _clean(self, native: bool) -> None:
        self.core.delete_collection_namespaced_pod(
            BENCH_NS, grace_period_seconds=0, propagation_policy="Background"
        )
        if native:
            self.objects.delete_collection_namespaced_custom_object(
                "scheduling.k8s.io", "v1alpha2", BENCH_NS, "podgroups"
            )
        end = time.monotonic() + 30
        while time.monotonic() < end and self.core.list_namespaced_pod(BENCH_NS, limit=1).items:
            time.sleep(0.2)
        # the placer deletes its PodGroups once their pods are gone: not during the next run
        while time.monotonic() < end and self._podgroups():
            time.sleep(0.2)
        # kube-scheduler's Events are rate limited too: a burst that fragmented leaves hundreds
        # queued (FailedScheduling), posted while the next run goes on; let them all land first
        seen, still = -1, time.monotonic()
        while time.monotonic() < end and time.monotonic() - still < 1.0:
            items = self.core.list_namespaced_event(BENCH_NS).items
            now = max((int(e.metadata.resource_version) for e in items), default=0)  # a new
            if now != seen:  # Event, or one counted again (PATCH), since the last look
                seen, still = now, time.monotonic()
            time.sleep(0.2)
        self.core.delete_collection_namespaced_event(BENCH_NS)
        time.sleep(1.0)  # the placer and the scheduler see the room freed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shapes", default="full,half")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-v", "--verbose", action="store_true", help="print each gang's timeline")
    ap.add_argument(
        "--webhook",
        type=Path,
        default=Path(__file__).resolve().parent.parent / ".venv" / "bin" / "gpufabric-webhook",
        help="the gpufabric-webhook to run (another checkout's: before/after)",
    )
    ap.add_argument("--logs", type=Path, help="keep each control plane's logs in this folder")
    ap.add_argument("--ways", default="gpufabric-served,gpufabric-unserved,native")
    ap.add_argument(
        "--sched-v",
        type=int,
        help="kube-scheduler's log level (5: each pod-group cycle; with --logs to keep it)",
    )
    ap.add_argument(
        "--pprof",
        type=int,
        default=0,
        metavar="SECONDS",
        help="profile kube-apiserver's CPU for SECONDS from each burst's start; print its top",
    )
    args = ap.parse_args()
    ways = args.ways.split(",")
    if args.logs is not None:
        args.logs.mkdir(parents=True, exist_ok=True)
    more = (f"--v={args.sched_v}",) if args.sched_v is not None else ()
    clusters: dict[str, realcluster.Installed] = {}
    planes: dict[str, Plane] = {}
    try:
        if any(w != "gpufabric-unserved" for w in ways):
            clusters["served"] = realcluster.up(served=True, webhook=args.webhook, sched_args=more)
        if "gpufabric-unserved" in ways:
            clusters["unserved"] = realcluster.up(
                served=False, webhook=args.webhook, sched_args=more
            )
        planes.update((k, Plane(c)) for k, c in clusters.items())
        for p in planes.values():
            p.verbose, p.pprof, p.keep = args.verbose, args.pprof, args.logs
        results = []
        for r in range(args.rounds):
            for shape in args.shapes.split(","):
                order = ways[r % len(ways) :] + ways[: r % len(ways)]
                for way in order:
                    plane = planes["unserved" if way == "gpufabric-unserved" else "served"]
                    res = plane.burst(way, shape, args.seed + r, f"r{r}-{shape}-{SHORT[way]}")
                    res = replace(res, round=r)
                    results.append(res)
                    print(
                        f"round {r} {shape} {way}: {res.placed}/{res.gangs} placed, {res.seconds:.2f} s",
                        flush=True,
                    )
        table(results)
        for p in planes.values():
            if p.restarts:
                print(
                    "kube-scheduler restarted after " + ", ".join(p.restarts) + ": it kept "
                    "deleted gang members on their nodes (1.36.2: a member deleted during its "
                    "binding cycle); each later run had a clean scheduler"
                )
            for tag, top in p.profiles.items():
                print(f"kube-apiserver CPU, {tag}: {top.total / 1e9:.2f} s; {pprof.by_part(top)}")
                if args.verbose:
                    print(pprof.table(top))
    finally:
        for p in planes.values():
            p.rec.stop.set()  # its watch ends as its plane goes: no thread left at exit
        for c in clusters.values():
            realcluster.down(c, args.logs)


if __name__ == "__main__":
    main()
