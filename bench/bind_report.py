"""What bench/bind_bench.py keeps of a run and prints: each member's times, each run's result, the
API server's and serve's metrics it reads, each gang's timeline and the table of runs against
kube-scheduler's own gang."""

from __future__ import annotations

import os
import re
import statistics
from dataclasses import dataclass
from pathlib import Path


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


def request_counts(text: str) -> dict[str, float]:
    """apiserver_request_total by verb, resource and subresource (watches left out)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        head, _, value = line.rpartition(" ")
        labels = dict(re.findall(r'(\w+)="([^"]*)"', head))
        if labels.get("verb") == "WATCH":
            continue
        sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
        key = f"{labels.get('verb')} {labels.get('resource')}{sub}"
        out[key] = out.get(key, 0.0) + float(value)
    return out


def request_seconds(text: str) -> dict[str, float]:
    """Seconds the API server spent answering (apiserver_request_duration_seconds_sum), by verb,
    resource and subresource as request_counts keys them: with the counts, the mean time of
    one request as the server saw it, to set beside what the caller waited."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_duration_seconds_sum{"):
            continue
        head, _, value = line.rpartition(" ")
        labels = dict(re.findall(r'(\w+)="([^"]*)"', head))
        if labels.get("verb") == "WATCH":
            continue
        sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
        key = f"{labels.get('verb')} {labels.get('resource')}{sub}"
        out[key] = out.get(key, 0.0) + float(value)
    return out


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
        "| ratio of medians | ratio in each round: median (range) |"
    )
    print("|---|---|---|---|---|---|---|---|")
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
        print(
            f"| {shape} | {way} | {placed} of {rs[0].gangs} | {sum(x.partly for x in rs)} "
            f"| {sum(x.split for x in rs)} | {min(secs):.2f}-{max(secs):.2f} (median {med:.2f}) "
            f"| {ratio:.2f}x | {paired} |"
        )
    print()
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
            f"serve {adm['serve']:.1f}  cpu s {cpu}"
        )
