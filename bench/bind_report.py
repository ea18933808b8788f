"""What bench/bind_bench.py keeps of a run and prints: each member's times (its pod watch), each
run's result, the API server's and serve's metrics it reads, each gang's timeline, the gangs left
unbound and the table of runs against kube-scheduler's own gang."""

from __future__ import annotations

import json
import os
import re
import statistics
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from webhook.kube.client import watch_events
from webhook.kube.watch import Gone


@dataclass
class Seen:
    """One member's times (monotonic seconds) as this process saw them."""

    gang: str
    created: float = 0.0  # the CREATE answered
    admission: float = 0.0  # seconds the CREATE took (our webhook's review is in it)
    ungated: float = 0.0  # first seen without the group gate (native: at creation)
    bound: float = 0.0
    node: str = ""
    placement: str = ""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (and its waited-for children) so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def metric_sums(text: str, name: str, match: str = "") -> tuple[float, float]:
    """(sum, count) of a Prometheus histogram `name` over the series whose labels hold `match`."""
    total = count = 0.0
    for line in text.splitlines():
        if line.startswith(name) and match in line:
            head, _, value = line.rpartition(" ")
            if head.startswith(f"{name}_sum"):
                total += float(value)
            elif head.startswith(f"{name}_count"):
                count += float(value)
    return total, count


def _by_request(text: str, series: str) -> dict[str, float]:
    """A kube-apiserver series summed by verb, resource and subresource ("PATCH pods/status"),
    watches left out."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(f"{series}{{"):
            continue
        head, _, value = line.rpartition(" ")
        labels = dict(re.findall(r'(\w+)="([^"]*)"', head))
        if labels.get("verb") == "WATCH":
            continue
        sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
        key = f"{labels.get('verb')} {labels.get('resource')}{sub}"
        out[key] = out.get(key, 0.0) + float(value)
    return out


def api_metrics(api: client.ApiClient) -> str:
    """kube-apiserver's /metrics, as the client `api` (its token) may read them."""
    method, url, headers, body, _ = api.param_serialize(
        "GET", "/metrics", auth_settings=["BearerToken"]
    )
    answer: Any = api.call_api(method, url, headers, body)
    return str(answer.read().decode())


def request_counts(text: str) -> dict[str, float]:
    """apiserver_request_total by verb, resource and subresource (watches left out)."""
    return _by_request(text, "apiserver_request_total")


def request_seconds(text: str) -> dict[str, float]:
    """Seconds the API server spent answering (apiserver_request_duration_seconds_sum), keyed as
    request_counts: with the counts, the mean time of one request as the server saw it, to set
    beside what the caller waited."""
    return _by_request(text, "apiserver_request_duration_seconds_sum")


@dataclass(frozen=True)
class Result:
    way: str
    shape: str
    gangs: int
    placed: int
    partly: int
    split: int
    seconds: float  # first create -> last bind of a placed gang
    phases: dict[str, float]  # median seconds per member
    cpu: dict[str, float]  # CPU seconds each component spent on the burst
    admission: dict[str, float]  # mean ms a review: as the API server saw it, inside serve
    requests: dict[str, float]  # API requests made during the burst, by verb and resource
    round: int = 0


def timeline(
    names: list[str], gangs: list[tuple[int, str]], seen: dict[str, Seen], t0: float, made: float
) -> None:
    """Per gang, seconds after the burst's first create: its last member created, its first and
    last member ungated, first and last bound."""
    print(f"  all created at {made:.2f}")
    for name, (size, _) in zip(names, gangs, strict=True):
        ms = [s for s in seen.values() if s.gang == name]

        def span(vals: list[float]) -> str:
            got = [v - t0 for v in vals if v]
            return f"{min(got):5.2f}-{max(got):5.2f}" if got else "    -      "

        nodes = ",".join(sorted(s.node[-3:] for s in ms if s.node))
        print(
            f"  {name:14} {size:2}  created {span([s.created for s in ms])}  ungated "
            f"{span([s.ungated for s in ms])}  bound {span([s.bound for s in ms])}  "
            f"{ms[0].placement} {nodes}"
        )


def table(results: list[Result]) -> None:
    """Per burst and way: the runs, and two ratios to native. The machine is shared and its
    load drifts, so beside the ratio of the medians each run is also set against native's run
    of the same round (same seed, minutes apart at most): the median of those pairs, and their
    range."""
    print(
        "| burst | way | gangs placed | partly bound | split | s to all bound "
        "| ratio of medians | ratio in each round: median (range) | CPU-s, ratio |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    by = {
        (r.shape, r.way): [x for x in results if (x.shape, x.way) == (r.shape, r.way)]
        for r in results
    }
    for (shape, way), rs in sorted(by.items()):
        natives = {x.round: x.seconds for x in by.get((shape, "native"), [])}
        secs = [x.seconds for x in rs]
        med = statistics.median(secs)
        ratio = med / statistics.median(natives.values()) if natives else float("nan")
        pairs = [x.seconds / natives[x.round] for x in rs if x.round in natives]
        paired = (
            f"{statistics.median(pairs):.2f}x ({min(pairs):.2f}-{max(pairs):.2f})" if pairs else "-"
        )
        placed = "/".join(f"{x.placed}" for x in rs)
        work = statistics.median(sum(x.cpu.values()) for x in rs)
        natives_work = [sum(x.cpu.values()) for x in by.get((shape, "native"), [])]
        spent = work / statistics.median(natives_work) if natives_work else float("nan")
        print(
            f"| {shape} | {way} | {placed} of {rs[0].gangs} | {sum(x.partly for x in rs)} "
            f"| {sum(x.split for x in rs)} | {min(secs):.2f}-{max(secs):.2f} (median {med:.2f}) "
            f"| {ratio:.2f}x | {paired} | {work:.2f}, {spent:.2f}x |"
        )
    print()
    print(
        f"CPU-s: the CPU seconds every process of the plane, serve and the bench spent on the run "
        f"(median), and its ratio to native's; on {CORES} cores a run cannot end before its "
        f"CPU-s / {CORES} (its floor, each run below): where both are at their floor the time "
        "ratio is the CPU ratio"
    )
    print(
        "median seconds per member: its CREATE (admission), created -> its gang's last created "
        "(wait) -> ungated (decide) -> bound (bind); mean ms a review of ours took as the API "
        "server saw it and inside serve; CPU seconds each component spent on the burst"
    )
    for r in results:
        p = r.phases
        cpu = " ".join(f"{k} {v:.1f}" for k, v in r.cpu.items())
        adm = r.admission
        print(
            f"  r{r.round} {r.shape:4} {r.way:18} admission {p['admission']:.3f} "
            f"wait {p['wait']:.2f} decide {p['decide']:.2f} bind {p['bind']:.2f} "
            f"total {p['all']:.2f}  all bound {r.seconds:.2f}  review ms api {adm['api']:.1f} "
            f"serve {adm['serve']:.1f}  cpu s {cpu}  total {sum(r.cpu.values()):.2f}, floor "
            f"{sum(r.cpu.values()) / CORES:.2f} s"
        )


GATE = "gpufabric.io/group"
BENCH_NS = "bench"
CORES = os.cpu_count() or 1  # the plane, serve and the bench share them


@dataclass
class Recorder:
    """A watch of the bench namespace's pods: when each was ungated and bound."""

    api: client.ApiClient
    pods: dict[str, Seen] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        # Plain dicts, each event decoded once (serve's own watch): the client's models cost
        # ~2 ms of this process's CPU an event, and a way that writes a pod more often would
        # pay for the bench's watching on the same 2 cores as the plane. A watch that ends (the
        # server closes it every 240 s, or it drops) goes on from the last version it saw:
        # started again from a fresh list's version it lost the events in between, and a bind
        # among them was seen only at the next run's clean up (runs of 12-14 s, seventh pass).
        core = client.CoreV1Api(self.api)
        version = ""
        while not self.stop.is_set():
            try:
                if not version:  # the first time, and after 410: what is there now
                    raw = core.list_namespaced_pod(BENCH_NS, _preload_content=False)
                    listed = json.loads(raw.data)
                    version = str(listed["metadata"]["resourceVersion"])
                    for pod in listed.get("items") or []:
                        self._saw(pod, time.monotonic())
                for ev in watch_events(core.list_namespaced_pod, BENCH_NS, version=version):
                    obj = ev["object"]
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        self._saw(obj, time.monotonic())
                    if self.stop.is_set():
                        break
            except Gone:
                version = ""
            except Exception:  # noqa: BLE001 - a dropped watch goes on from `version`
                time.sleep(0.1)

    def _saw(self, pod: dict[str, Any], now: float) -> None:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        with self.lock:
            s = self.pods.get(meta["name"])
            if s is None:
                return  # not this run's
            gates = [g.get("name") for g in spec.get("schedulingGates") or []]
            if not s.ungated and GATE not in gates:
                s.ungated = now
            s.placement = (meta.get("annotations") or {}).get("gpufabric.io/placement", s.placement)
            if not s.bound and spec.get("nodeName"):
                s.bound, s.node = now, spec["nodeName"]


def result_of(
    level_of: Mapping[str, Mapping[str, str]],
    way: str,
    shape: str,
    gangs: list[tuple[int, str]],
    names: list[str],
    seen: dict[str, Seen],
    t0: float,
    cpu: dict[str, float],
    admission: dict[str, float],
    requests: dict[str, float],
) -> Result:
    """A run's Result from what the Recorder saw: gangs placed, partly bound and split (bound
    across domains of their level, by `level_of` each node's labels), time to all bound, and the
    median of each member's phases."""
    placed = partly = split = 0
    ends = []
    phases: dict[str, list[float]] = {
        "admission": [],
        "wait": [],
        "decide": [],
        "bind": [],
        "all": [],
    }
    for name, (size, level) in zip(names, gangs, strict=True):
        members = [s for s in seen.values() if s.gang == name]
        bound = [s for s in members if s.bound]
        if len(bound) == size:
            placed += 1
            ends.append(max(s.bound for s in bound))
            domains = {level_of[s.node].get(f"gpufabric.io/{level}") for s in bound}
            split += len(domains) > 1
        elif bound:
            partly += 1
        complete = max(s.created for s in members)
        for s in members:
            phases["admission"].append(s.admission)
            phases["wait"].append(complete - s.created)
            if s.ungated:
                phases["decide"].append(s.ungated - complete)
            if s.bound:
                phases["bind"].append(s.bound - max(s.ungated, complete))
                phases["all"].append(s.bound - s.created)
    return Result(
        way,
        shape,
        len(gangs),
        placed,
        partly,
        split,
        max(ends) - t0 if ends else float("nan"),
        {k: statistics.median(v) if v else float("nan") for k, v in phases.items()},
        cpu,
        admission,
        requests,
    )


def print_unplaced(
    left: list[str], pods: list[Any], level_of: Mapping[str, Mapping[str, str]]
) -> None:
    """Each gang in `left` (not all bound): where each member stood when the run ended (its
    gate, node, nominated node, kube-scheduler's last word), and who holds its domain."""
    for name in left:
        states: dict[str, int] = {}
        for p in pods:
            if (p.metadata.labels or {}).get("bench-gang") != name:
                continue
            gates = ",".join(g.name for g in p.spec.scheduling_gates or []) or "-"
            said = [c for c in p.status.conditions or [] if c.type == "PodScheduled"]
            word = f"{said[0].reason}: {said[0].message}" if said else "-"
            state = (
                f"gates {gates}, node {p.spec.node_name or '-'}, nominated "
                f"{'yes' if p.status.nominated_node_name else 'no'}, scheduler {word[:140]}"
            )
            states[state] = states.get(state, 0) + 1
        print(f"  not all bound: {name}")
        for state, count in sorted(states.items()):
            print(f"    {count} x {state}")
        _occupants(name, pods, level_of)


def _occupants(name: str, pods: list[Any], level_of: Mapping[str, Mapping[str, str]]) -> None:
    """Who holds the nodes of the domain the placer gave gang `name`: bound and nominated
    pods there, by gang (the placer and kube-scheduler disagree on that domain's room)."""
    mine = [p for p in pods if (p.metadata.labels or {}).get("bench-gang") == name]
    placed = {(p.metadata.annotations or {}).get("gpufabric.io/placement", "") for p in mine}
    for where in sorted(placed - {""}):
        level, _, domain = where.partition("=")
        nodes = {n for n, lb in level_of.items() if lb.get(f"gpufabric.io/{level}") == domain}
        held: dict[str, list[str]] = {}
        for p in pods:
            gang = (p.metadata.labels or {}).get("bench-gang", "?")
            if p.spec.node_name in nodes:
                held.setdefault(f"bound {gang}", []).append(p.spec.node_name[-3:])
            elif p.status.nominated_node_name in nodes:
                held.setdefault(f"nominated {gang}", []).append(p.status.nominated_node_name[-3:])
        print(
            f"    {where} ({len(nodes)} nodes) holds: "
            + (
                "; ".join(f"{k} on {','.join(sorted(v))}" for k, v in sorted(held.items()))
                or "nothing"
            )
        )
