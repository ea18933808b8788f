#!/usr/bin/env python3
"""`gpufabric-webhook topology --status DIR` over many status files, against a bare read of the
same files with PyYAML's C loader (issue 17: 700 files took 45-55 s in the pure-Python loader).

    .venv/bin/python bench/topology_bench.py [--nodes 700] [--rounds 3] [--src DIR]

The files: one GpuNodeStatus per node (the HGX H100 golden, 15 KiB of YAML, renamed, its 8
compute HCAs given the node's GUIDs in a synthetic 8-rail fat tree printed as ibnetdiscover
output, which is the `--source`). Each round runs, as processes, the bare read (`yaml.load(...,
Loader=yaml.CSafeLoader)` of every file, nothing else) and `topology --source DUMP --status DIR -o
labels`, in alternating order; the table gives the median CPU time (user + system of the process)
and wall time of each and their ratio (target <= 1.5x). `--src DIR` runs the command from another
checkout (e.g. the code before issue 17) for a before/after pair.
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes.fabric_dump import FatTree  # noqa: E402

BARE = """
import sys
from pathlib import Path
import yaml
for path in sorted(Path(sys.argv[1]).glob("*.yaml")):
    yaml.load(path.read_bytes(), Loader=yaml.CSafeLoader)
"""


def write_inputs(nodes: int, where: Path) -> tuple[Path, Path]:
    """The dump and a directory of one status file per node; returns (dump, directory)."""
    per_su = 20
    tree = FatTree(-(-nodes // per_su), per_su, rails=8, spines=8)
    text, statuses = tree.render()
    dump = where / "fabric.topo"
    dump.write_text(text)
    golden = yaml.safe_load((ROOT / "tests" / "golden" / "hgx-h100.yaml").read_text())
    folder = where / "statuses"
    folder.mkdir()
    for node in tree.node_names()[:nodes]:
        doc: dict[str, Any] = copy.deepcopy(golden)
        doc["metadata"]["name"] = node
        compute = [h for h in doc["status"]["hcas"] if h.get("computeFabric")]
        for hca, fake in zip(compute, statuses[node]["hcas"], strict=True):
            hca["nodeGuid"] = fake["nodeGuid"]
        (folder / f"{node}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return dump, folder


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, stdout) of one process run to the end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, out.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=700, help="status files (default 700)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--src", default="", help="run the command from this checkout")
    args = parser.parse_args()
    src = Path(args.src).resolve() if args.src else ROOT
    env = {**os.environ, "PYTHONPATH": str(src)}
    with tempfile.TemporaryDirectory() as tmp:
        dump, folder = write_inputs(args.nodes, Path(tmp))
        size = sum(p.stat().st_size for p in folder.iterdir())
        bare = [sys.executable, "-c", BARE, str(folder)]
        command = [sys.executable, "-m", "webhook", "topology", "--source", str(dump)]
        command += ["--status", str(folder), "-o", "labels"]
        runs: dict[str, list[tuple[float, float]]] = {"bare": [], "topology": []}
        placed = 0
        for r in range(args.rounds):
            order = ("bare", "topology") if r % 2 == 0 else ("topology", "bare")
            for name in order:
                cpu, wall, out = timed(bare if name == "bare" else command, src, env)
                runs[name].append((cpu, wall))
                if name == "topology":
                    placed = len(out.splitlines())
    cpu = {k: statistics.median(c for c, _ in v) for k, v in runs.items()}
    wall = {k: statistics.median(w for _, w in v) for k, v in runs.items()}
    print(
        f"{args.nodes} status files ({size / 2**20:.1f} MiB of YAML), {placed} nodes placed, "
        f"{args.rounds} interleaved rounds, command from {src}"
    )
    print("| run | CPU s (median) | wall s (median) |")
    print("|---|---|---|")
    for name in runs:
        print(f"| {name} | {cpu[name]:.2f} | {wall[name]:.2f} |")
    print(
        f"topology / bare C-loader read: {cpu['topology'] / cpu['bare']:.2f}x CPU, "
        f"{wall['topology'] / wall['bare']:.2f}x wall (target <= 1.5x)"
    )


if __name__ == "__main__":
    main()
