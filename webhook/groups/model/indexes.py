"""A member's own index, from the labels and annotations its controller writes. Pure.

The keys are DESIGN.md "Ranks": Job completion index, StatefulSet pod index, LeaderWorkerSet
worker index (the leader is 0), Kubeflow replica index, and JobSet's job index x pods per job +
completion index. Rank 0 is the pod the workload's own convention makes the coordinator: a
Kubeflow master (PyTorchJob, XGBoostJob, PaddleJob; TFJob chief) is rank 0 and worker i rank i+1,
as the training operator sets RANK; an MPIJob launcher with GPUs is rank 0 and worker i rank i+1
(mpi-operator's runLauncherAsWorker hostfile lists it first), one without GPUs is no rank; a
JobSet whose spec names a coordinator (label `jobset.sigs.k8s.io/coordinator`, the coordinator
pod's hostname.service) has that pod at rank 0, the others after it in JobSet order.
A JobSet pod does not say how many pods its Job runs: that is the group size over the Jobs the
group spans. A group inside one replicated job counts `job-index` of `replicatedjob-replicas`; a
group over several, `job-global-index` of `global-replicas` (else the distinct Jobs it has).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
POD_INDEX = "apps.kubernetes.io/pod-index"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
KUBEFLOW_REPLICA_INDEX = "training.kubeflow.org/replica-index"
KUBEFLOW_REPLICA_TYPE = "training.kubeflow.org/replica-type"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOBSET_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
JOBSET_GLOBAL_REPLICAS = "jobset.sigs.k8s.io/global-replicas"
JOBSET_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOBSET_REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_COORDINATOR = "jobset.sigs.k8s.io/coordinator"
KUBEFLOW_JOB_ROLE = "training.kubeflow.org/job-role"  # training operator: "master"; mpi-operator
# v2 (no replica-type label): "launcher" or "worker"
_COORDINATORS = ("master", "chief")  # replica types the training operator labels job-role=master
LAUNCHER = "launcher"
COORDINATOR = "coordinator"
_DIRECT = (COMPLETION_INDEX, POD_INDEX, LWS_WORKER_INDEX, KUBEFLOW_REPLICA_INDEX)


@dataclass(frozen=True, slots=True)
class Ident:
    """What a pod says about its place in its workload (all None: a plain pod)."""

    index: int | None = None  # its own index within its Job / set
    source: str = ""  # the key the index came from
    job: int | None = None  # JobSet: the Job's index in its replicated job
    jobs: int | None = None  # JobSet: how many Jobs its replicated job has
    replicated: str = ""  # JobSet: the replicated job's name
    global_job: int | None = None  # JobSet: the Job's index in the whole JobSet
    global_jobs: int | None = None  # JobSet: how many Jobs the JobSet has
    bad: str = ""  # a key whose value is not a non-negative integer
    role: str = ""  # COORDINATOR (rank 0), LAUNCHER (rank 0 with GPUs, else none), or ""
    host: str = ""  # JobSet: the pod's hostname, <jobset>-<replicated job>-<job>-<index>
    coordinator: str = ""  # JobSet: the coordinator pod's hostname, when the spec names one


PLAIN = Ident()


def natural(text: str | None) -> int | None:
    """A non-negative integer written in ASCII digits (str.isdigit also takes "²"), else None."""
    return int(text) if text is not None and text.isascii() and text.isdigit() else None


def _read(labels: Mapping[str, str], annotations: Mapping[str, str], key: str) -> str | None:
    value = annotations.get(key, labels.get(key))
    return None if value is None else str(value).strip()


def _kubeflow_role(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
    """The Kubeflow replica type, lower case: the training operator's replica-type label, else
    mpi-operator's job-role; "" for a pod of neither."""
    kind = _read(labels, annotations, KUBEFLOW_REPLICA_TYPE)
    if kind is None:
        kind = _read(labels, annotations, KUBEFLOW_JOB_ROLE)
    return (kind or "").lower()


def ident_of(labels: Mapping[str, str], annotations: Mapping[str, str]) -> Ident:
    index, source, bad = None, "", ""
    kind = _kubeflow_role(labels, annotations)
    role = LAUNCHER if kind == LAUNCHER else COORDINATOR if kind in _COORDINATORS else ""
    for key in _DIRECT:
        text = _read(labels, annotations, key)
        if text is None:
            continue
        if key == KUBEFLOW_REPLICA_INDEX and kind not in ("", "worker"):
            continue  # a master's or launcher's index is 0 of its own type, not a worker's
        index = natural(text)
        if index is None:
            bad = f"{key}={text!r}"
            break
        source = key
        break
    job_text = _read(labels, annotations, JOBSET_JOB_INDEX)
    job = natural(job_text)
    if job_text is not None and job is None and not bad:
        bad = f"{JOBSET_JOB_INDEX}={job_text!r}"
    if index is None and job is None and not bad and not role:
        return PLAIN

    def count(key: str) -> int | None:
        return natural(_read(labels, annotations, key)) or None  # 0 Jobs says nothing

    replicated = _read(labels, annotations, JOBSET_REPLICATED_JOB) or ""
    jobset = _read(labels, annotations, JOBSET_NAME) or ""
    host = f"{jobset}-{replicated}-{job}-{index or 0}" if jobset and replicated else ""
    return Ident(
        index,
        source,
        job,
        count(JOBSET_REPLICAS),
        replicated,
        natural(_read(labels, annotations, JOBSET_GLOBAL_INDEX)),
        count(JOBSET_GLOBAL_REPLICAS),
        bad,
        role,
        host if job is not None else "",
        (_read(labels, annotations, JOBSET_COORDINATOR) or "").partition(".")[0],
    )


def direct_problem(ident: Ident, size: int) -> str | None:
    """What admission can tell from one pod alone: a bad value, or an index not below the size
    (a JobSet rank needs the other members: the placer checks it)."""
    if ident.bad:
        return f"{ident.bad} is not a non-negative integer"
    if ident.job is None and ident.index is not None and ident.index >= size:
        return f"{ident.source}={ident.index} is not below the group size {size}"
    return None


@dataclass(frozen=True, slots=True)
class Indexed:
    ranks: Mapping[str, int]  # member -> the rank its index gives it (plain members absent)
    problems: tuple[str, ...]  # each names the pods
    unranked: frozenset[str] = frozenset()  # members that take no rank (launcher, no GPUs)


def resolve(
    size: int,
    members: Sequence[tuple[str, Ident]],
    gpus: Mapping[str, int] | None = None,
    recorded: Mapping[str, int] | None = None,
) -> Indexed:
    """Ranks from the members' indexes and roles, or why they cannot be: a bad value, an index
    not below the size, two members with the same index or two coordinators, JobSet jobs that
    do not divide the size. `gpus`: member -> GPUs (a launcher without any takes no rank);
    `recorded`: the ranks placed members hold (a lost coordinator's workers still follow it)."""
    problems: list[str] = []
    ranks: dict[str, int] = {}
    unranked = frozenset(k for k, i in members if i.role == LAUNCHER and not (gpus or {}).get(k))
    leads = sorted(k for k, i in members if i.role and k not in unranked)
    behind = any(  # a worker placed after a coordinator that is gone now
        i.source == KUBEFLOW_REPLICA_INDEX and i.index is not None and held == i.index + 1
        for k, i in members
        if (held := (recorded or {}).get(k)) is not None
    )
    if len(leads) > 1:
        problems.append(
            f"more than one coordinator (Kubeflow master or launcher): {', '.join(leads)}"
        )
    limit = size - len(unranked)  # ranks 0..limit-1
    bound = f"the group size {size}" if not unranked else f"the {limit} ranks (group size {size}"
    bound += f" less {len(unranked)} launcher without GPUs)" if unranked else ""
    jobset = [(k, i) for k, i in members if i.job is not None]
    if len({i.replicated for _, i in jobset}) > 1 and all(
        i.global_job is not None for _, i in jobset
    ):  # the group spans replicated jobs: count Jobs across the JobSet
        members = [
            (k, replace(i, job=i.global_job, jobs=i.global_jobs) if i.job is not None else i)
            for k, i in members
        ]
        jobset = [(k, i) for k, i in members if i.job is not None]
    per_job = 0
    if jobset:
        declared = {i.jobs for _, i in jobset if i.jobs is not None}
        jobs = declared.pop() if len(declared) == 1 else len({i.job for _, i in jobset})
        if size % jobs:
            names = ", ".join(k for k, _ in jobset[:3])
            problems.append(
                f"group size {size} is not a multiple of the JobSet's {jobs} jobs ({names}, ...)"
            )
        per_job = size // jobs
    for key, ident in members:
        if key in unranked:
            continue
        if ident.bad:
            problems.append(f"{key}: {ident.bad} is not a non-negative integer")
            continue
        if ident.role:
            rank, source = 0, "the coordinator"
        elif ident.job is not None:
            inner = ident.index if ident.index is not None else 0
            if per_job and inner >= per_job:
                problems.append(
                    f"{key}: completion index {inner} is not below the {per_job} pods per Job "
                    f"(group size {size} over the JobSet's jobs)"
                )
                continue
            rank, source = ident.job * per_job + inner, "JobSet job index x pods per job + index"
        elif (
            ident.index is not None and ident.source == KUBEFLOW_REPLICA_INDEX and (leads or behind)
        ):
            rank, source = ident.index + 1, f"{ident.source} + 1, after the coordinator"
        elif ident.index is not None:
            rank, source = ident.index, ident.source
        else:
            continue
        if rank >= limit:
            problems.append(f"{key}: index {rank} ({source}) is not below {bound}")
            continue
        ranks[key] = rank
    lead = next((k for k, i in members if i.host and i.host == i.coordinator and k in ranks), "")
    if lead:  # the JobSet's coordinator first, the others after it in JobSet order
        at = ranks[lead]
        ranks = {k: 0 if k == lead else r + (r < at) for k, r in ranks.items()}
    holders: defaultdict[int, list[str]] = defaultdict(list)
    for key, rank in ranks.items():
        holders[rank].append(key)
    for rank, keys in sorted(holders.items()):
        if len(keys) > 1:
            problems.append(f"index {rank} is held by more than one pod: {', '.join(sorted(keys))}")
    return Indexed(ranks, tuple(problems), unranked)
