"""A real slurmctld for the block tests: a build of `hack/slurm-build.sh` started on a topology.conf
with the fabric's nodes `State=CLOUD` (no slurmd needed), read back through `scontrol show topology`
and `sbatch --test-only -N k`. Builds live in ../slurm-build/<X.Y>/ beside the clone (or
$GPUFABRIC_SLURM_BUILD/<X.Y>/); a test that needs one skips, naming the build command, without."""

from __future__ import annotations

import getpass
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from webhook.fabric.names import compress_hostlist, expand_hostlist

REPO = Path(__file__).resolve().parents[3]
ROOT = Path(os.environ.get("GPUFABRIC_SLURM_BUILD") or REPO.parent / "slurm-build")
BUILD = (
    "bash hack/slurm-build.sh 25.05"  # what the skip message names (any of 23.11-26.05 runs too)
)
_PLACED = re.compile(r"on nodes (\S+) in partition")
# Log errors that are no topology's: an empty StateSaveLocation (24.11 and earlier log it as an
# error: 24.11.7 src/slurmctld/node_mgr.c:260-264; 25.05 "No node state file ... to recover"), and
# 25.11's URL parser, loaded by every conmgr (25.11.7 src/conmgr/conmgr.c:160 `url_parser_g_init`,
# not behind disable_http) from libhttp_parser, which hack/slurm-build.sh does not need.
_NOT_TOPOLOGY = re.compile(
    r"error: (Could not open \w+ state file \S+: No such file or directory"
    r"|NOTE: Trying backup state save file\."
    r"|cannot create url_parser context for http_parser/libhttp_parser$)"
)


def builds() -> dict[str, Path]:
    """Release (X.Y) -> install prefix, for each build under ROOT."""
    if not ROOT.is_dir():
        return {}
    return {
        p.name: p
        for p in sorted(ROOT.iterdir())
        if re.fullmatch(r"\d\d\.\d\d", p.name) and (p / "sbin" / "slurmctld").is_file()
    }


@dataclass(frozen=True)
class Ctld:
    prefix: Path
    conf: Path
    log: Path

    def tool(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "SLURM_CONF": str(self.conf)}
        return subprocess.run(
            [str(self.prefix / "bin" / name), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def topology(self) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
        """(the blocks' nodes by BlockIndex, each listed aggregate's nodes) of `scontrol show
        topology`."""
        out = self.tool("scontrol", "show", "topology")
        assert out.returncode == 0, out.stderr
        blocks: list[tuple[str, ...]] = []
        aggregates: list[tuple[str, ...]] = []
        for line in out.stdout.splitlines():
            fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
            nodes = tuple(expand_hostlist(fields["Nodes"])) if fields.get("Nodes") else ()
            (blocks if "BlockName" in fields else aggregates).append(nodes)
        return blocks, aggregates

    def test_only(self, k: int) -> tuple[str, ...] | None:
        """The nodes `sbatch --test-only -N k` would start a job on; None when refused."""
        out = self.tool("sbatch", "--test-only", "-N", str(k), "--wrap", "true")
        found = _PLACED.search(out.stderr + out.stdout)
        if found:
            return tuple(expand_hostlist(found.group(1)))
        assert "Requested node configuration is not available" in out.stderr, out.stderr
        return None

    def problems(self) -> list[str]:
        """The log's errors and fatal errors, less those that are no topology's (_NOT_TOPOLOGY)."""
        return [
            ln
            for ln in self.log.read_text().splitlines()
            if ("error:" in ln or "fatal:" in ln) and not _NOT_TOPOLOGY.search(ln)
        ]


def _ports() -> tuple[int, int]:
    socks = [socket.socket() for _ in range(2)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = tuple(s.getsockname()[1] for s in socks)
    for s in socks:
        s.close()
    return ports[0], ports[1]


def _conf(tmp: Path, groups: Iterable[tuple[str, ...]]) -> str:
    ctld, slurmd = _ports()
    lines = [
        "ClusterName=gpufabric",
        f"SlurmctldHost={socket.gethostname().split('.')[0]}",
        f"SlurmUser={getpass.getuser()}",
        "AuthType=auth/none",  # no munge key or daemon: the test never leaves this host
        "CredType=cred/none",
        # 25.11+ listen for HTTP beside RPCs and log an error without an http_parser library
        # (26.05.3 src/common/http_switch.c `http_switch_init`); older releases ignore the word.
        "CommunicationParameters=disable_http",
        f"SlurmctldPort={ctld}",
        f"SlurmdPort={slurmd}",
        f"StateSaveLocation={tmp / 'state'}",
        f"SlurmctldPidFile={tmp / 'slurmctld.pid'}",
        f"SlurmctldLogFile={tmp / 'slurmctld.log'}",
        f"SlurmdSpoolDir={tmp / 'spool'}",
        "TopologyPlugin=topology/block",
        "MailProg=/bin/true",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none",
        "SuspendProgram=/bin/true",
        "ResumeProgram=/bin/true",
        "NodeName=DEFAULT CPUs=1 State=CLOUD",  # powered down: no slurmd, still placeable
        *(f"NodeName={compress_hostlist(g)}" for g in groups if g),
        "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


@contextmanager
def slurmctld(
    prefix: Path, topology: str, groups: Iterable[tuple[str, ...]], tmp: Path
) -> Iterator[Ctld]:
    """slurmctld of `prefix` running on `topology`, the nodes named by `groups`; stopped after."""
    for sub in ("state", "spool"):
        (tmp / sub).mkdir(parents=True, exist_ok=True)
    conf = tmp / "slurm.conf"
    conf.write_text(_conf(tmp, groups))
    (tmp / "topology.conf").write_text(topology)
    ctld = Ctld(prefix, conf, tmp / "slurmctld.log")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    proc = subprocess.Popen(
        [str(prefix / "sbin" / "slurmctld"), "-D", "-i"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while "is UP" not in ctld.tool("scontrol", "ping").stdout:
            if proc.poll() is not None or time.monotonic() > deadline:
                log = ctld.log.read_text() if ctld.log.exists() else ""
                raise AssertionError(f"slurmctld did not start: {log[-2000:]}")
            time.sleep(0.5)
        yield ctld
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
