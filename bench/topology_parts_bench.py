#!/usr/bin/env python3
"""A topology source too big for one ConfigMap (issue 22): `topology -o configmaps` of a synthetic
ibnetdiscover dump, and the same labels read back from the parts.

    .venv/bin/python bench/topology_parts_bench.py [--nodes 65536] [--rounds 1] [--quick]

The dump: 8-rail nodes in scalable units of 32, three tiers (tests/fakes/fabric_dump.py, as the
other fabric benches), written to a temporary file. Each process below runs to the end alone and
reports its CPU time (user + system) and peak RSS (from wait4):
1. `topology --source DUMP -o configmaps` against its baseline, a bare `gzip -6` of the same file
   in Python (zlib, 64 KiB blocks): the parts cost little more than compressing the dump.
2. The parts: how many, and the largest as the API stores it (compact JSON, must be < 1 MiB).
3. `topology --source PARTS -o labels` against `topology --source DUMP -o labels` (the labeler's
   path: decode the parts, then derive): the same lines, and what reading parts adds.
`--quick` is 4,096 nodes. The 65,536-node run takes ~3-4 minutes and ~1.5 GiB at most.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

GEN = """
import sys
from tests.fakes.fabric_dump import FatTree
n = int(sys.argv[1])
text, _ = FatTree(-(-n // 32), 32, rails=8, spines=16, tiers=3, pod_size=4).render()
with open(sys.argv[2], "w") as f:
    f.write(text)
"""
BARE_GZIP = """
import sys, zlib
z = zlib.compressobj(6, zlib.DEFLATED, 31)
n = 0
with open(sys.argv[1], "rb") as f:
    while block := f.read(65536):
        n += len(z.compress(block))
n += len(z.flush())
print(n)
"""


def run(cmd: list[str], out: Path | None = None) -> tuple[float, float, float, bytes]:
    """(CPU s, wall s, peak RSS MiB, stdout unless written to `out`) of one process."""
    started = time.perf_counter()
    sink = open(out, "wb") if out else None  # noqa: SIM115 - closed below, after wait4
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=sink or subprocess.PIPE)
    data = b"" if sink or proc.stdout is None else proc.stdout.read()  # wait4 reaps it
    _, status, usage = os.wait4(proc.pid, 0)
    if sink:
        sink.close()
    if status:
        raise SystemExit(f"{cmd} failed: {status}")
    cpu = usage.ru_utime + usage.ru_stime
    return cpu, time.perf_counter() - started, usage.ru_maxrss / 1024, data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=65536)
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds (default 1)")
    parser.add_argument("--quick", action="store_true", help="4,096 nodes")
    args = parser.parse_args()
    nodes = 4096 if args.quick else args.nodes
    py = sys.executable
    cli = [py, "-m", "webhook", "topology"]
    with tempfile.TemporaryDirectory() as tmp:
        dump, parts = Path(tmp) / "fabric.topo", Path(tmp) / "parts.yaml"
        subprocess.run([py, "-c", GEN, str(nodes), str(dump)], cwd=ROOT, check=True, env=ENV)
        size = dump.stat().st_size
        times: dict[str, list[tuple[float, float, float]]] = {}
        outs: dict[str, bytes] = {}
        for r in range(args.rounds):
            steps = [
                ("bare gzip -6", [py, "-c", BARE_GZIP, str(dump)], None),
                ("-o configmaps", [*cli, "--source", str(dump), "-o", "configmaps"], parts),
            ]
            for name, cmd, out in steps if r % 2 == 0 else steps[::-1]:
                cpu, wall, rss, data = run(cmd, out)
                times.setdefault(name, []).append((cpu, wall, rss))
                outs[name] = data
        for r in range(args.rounds):
            steps = [
                ("labels from dump", [*cli, "--source", str(dump), "-o", "labels"], None),
                ("labels from parts", [*cli, "--source", str(parts), "-o", "labels"], None),
            ]
            for name, cmd, out in steps if r % 2 == 0 else steps[::-1]:
                cpu, wall, rss, data = run(cmd, out)
                times.setdefault(name, []).append((cpu, wall, rss))
                outs[name] = data
        items = yaml.load(parts.read_bytes(), Loader=yaml.CSafeLoader)["items"]
        stored = [len(json.dumps(o, separators=(",", ":")).encode()) for o in items]
        gz = int(outs["bare gzip -6"])
    same = outs["labels from dump"] == outs["labels from parts"]
    digest = hashlib.sha256(outs["labels from parts"]).hexdigest()[:12]
    print(
        f"{nodes} nodes: dump {size / 1e6:.1f} MB, gzip -6 {gz / 1e6:.2f} MB "
        f"({gz / nodes:.0f} B/node); {len(items)} parts, largest {max(stored) / 1024:.0f} KiB "
        f"stored (limit 1024 KiB), {sum(stored) / 1e6:.1f} MB in all"
    )
    print("| run | CPU s | wall s | peak RSS MiB |")
    print("|---|---|---|---|")
    med = {k: tuple(statistics.median(x[i] for x in v) for i in range(3)) for k, v in times.items()}
    for name, (cpu, wall, rss) in med.items():
        print(f"| {name} | {cpu:.2f} | {wall:.2f} | {rss:.0f} |")
    print(
        f"-o configmaps / bare gzip: {med['-o configmaps'][0] / med['bare gzip -6'][0]:.2f}x CPU; "
        f"labels from parts / from dump: {med['labels from parts'][0] / med['labels from dump'][0]:.2f}x "
        f"CPU, {med['labels from parts'][2] / med['labels from dump'][2]:.2f}x peak RSS; "
        f"same labels: {same} ({len(outs['labels from parts'].splitlines())} lines, sha {digest})"
    )


if __name__ == "__main__":
    main()
