"""A cluster for bursts of gangs: the fake API server (with PodGroups and evictions that delete a
Pending pod at once, as the API server does for a pod bound to no node), a Job controller that
makes an evicted member again (new name and UID, gated as the webhook admits it), and kube-
scheduler as the issue saw it: it binds ungated pods one at a time, each some time after its
gate went (`delay`), from its own view of the nodes, which lags the API's: a deleted pod still
counts on its node for `lag` seconds, and pending pods it nominated keep their room. A pod that
fits nowhere gets PodScheduled=False with kube-scheduler's message and waits for the next
cluster event (a deleted pod leaving its view). With `native`, members of a PodGroup that exists
are bound all together or not at all (GangScheduling's Permit). Used by test_gang_burst.py and
bench/burst_bench.py."""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from tests.webhook.groups.fabric import fabric, gpu_pod
from tests.webhook.groups.fake_api import FakeApi
from webhook.groups.admission.admit import admit_group
from webhook.groups.extensions.gang.place import NativeGang
from webhook.groups.extensions.partly.bound import PartlyBound
from webhook.groups.framework.evictions import Outcome
from webhook.groups.model.pods import named_group
from webhook.groups.placer.enabled import Extensions
from webhook.groups.placer.placer import Placer
from webhook.kube.nodeselector import pod_admits

Pod = dict[str, Any]


class GangApi(FakeApi):
    """FakeApi plus PodGroups and the placer's evictions of partly bound members; `log` keeps
    the order of writes ("podgroup"/"patch"/"evict", name)."""

    def __init__(self) -> None:
        super().__init__()
        self.podgroups: dict[tuple[str, str], dict[str, Any]] = {}
        self.log: list[tuple[str, str]] = []
        self.gone: list[Pod] = []  # pods deleted since the world last told the watchers
        self.changed: list[tuple[str, str]] = []  # pods patched since then

    def patch_pod(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> None:
        super().patch_pod(namespace, name, ops)
        self.log.append(("patch", name))
        self.changed.append((namespace, name))

    def create_owned(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """As KubeOwnedApi: one of the name there already (409) is read back."""
        obj = copy.deepcopy(dict(body))
        name = obj["metadata"]["name"]
        if (namespace, name) in self.podgroups:
            return copy.deepcopy(self.podgroups[(namespace, name)])
        obj["metadata"]["uid"] = f"pg-{namespace}-{name}-{len(self.log)}"
        self.podgroups[(namespace, name)] = obj
        self.log.append(("podgroup", name))
        return copy.deepcopy(obj)

    def patch_owned(
        self, namespace: str, name: str, version: str, patch: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """A merge patch (None deletes a key), refused (409) when metadata.uid differs."""
        obj = self.podgroups[(namespace, name)]
        if patch.get("metadata", {}).get("uid") not in (None, obj["metadata"]["uid"]):
            raise RuntimeError("409: Precondition failed: UID in precondition")
        self.podgroups[(namespace, name)] = merged(obj, patch)
        self.log.append(("podgroup-patched", name))
        return copy.deepcopy(self.podgroups[(namespace, name)])

    def delete_owned(self, namespace: str, name: str, uid: str, version: str) -> None:
        have = self.podgroups.get((namespace, name))
        if have is not None and have["metadata"]["uid"] == uid:
            del self.podgroups[(namespace, name)]
            self.log.append(("podgroup-deleted", name))

    def evict_pod(
        self, namespace: str, name: str, dry_run: bool = False, uid: str = ""
    ) -> tuple[Outcome, str]:
        """FakeApi's Eviction (budgets counted), and an evicted pod deleted at once."""
        outcome, why = super().evict_pod(namespace, name, dry_run, uid)
        if outcome == "evicted" and not dry_run:
            self.remove(self.pods[(namespace, name)])
            self.log.append(("evict", name))
        return outcome, why

    def remove(self, pod: Pod) -> None:
        del self.pods[(pod["metadata"]["namespace"], pod["metadata"]["name"])]
        self.gone.append(pod)


def merged(obj: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    out = dict(obj) if isinstance(obj, Mapping) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merged(out.get(k), v)
    return out


def member(group: str, i: int, size: int, level: str = "leaf-pair", job: bool = True) -> Pod:
    """A member as its controller makes it (before admission)."""
    pod = gpu_pod(f"{group}-{i}", 8, namespace="burst", group=group, size=size, level=level)
    if job:
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": group,
                "uid": f"job-{group}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return pod


def admitted(pod: Pod, native: bool) -> Pod:
    """The pod as the webhook admits it at CREATE: gated, labelled, its PodGroup named."""
    ops = admit_group(pod, "CREATE", native_gang=native).ops
    return jsonpatch.JsonPatch(ops).apply(copy.deepcopy(pod)) if ops else pod


@dataclass
class Scheduler:
    api: GangApi
    nodes: Mapping[str, Mapping[str, str]]  # node -> labels
    rng: random.Random
    delay: tuple[float, float] = (0.0, 2.0)  # from ungated to its first try
    lag: tuple[float, float] = (0.5, 4.0)  # a deleted pod stays in its view this long
    native: bool = False
    gpus: int = 8
    ghosts: list[tuple[float, str, int]] = field(default_factory=list)  # (until, node, GPUs)
    ready: dict[str, float] = field(default_factory=dict)  # uid -> first try
    parked: set[str] = field(default_factory=set)
    admits: dict[str, tuple[str, ...]] = field(default_factory=dict)  # uid -> nodes (fixed once
    # ungated: affinity cannot change then)

    def deleted(self, pod: Pod, now: float) -> None:
        node = pod["spec"].get("nodeName")
        if node:
            self.ghosts.append((now + self.rng.uniform(*self.lag), node, _gpus(pod)))

    def _used(self) -> dict[str, int]:
        used = dict.fromkeys(self.nodes, 0)
        for p in self.api.pods.values():
            on = p["spec"].get("nodeName") or p.get("status", {}).get("nominatedNodeName")
            if on:
                used[on] += _gpus(p)
        for _, node, g in self.ghosts:
            used[node] += g
        return used

    def step(self, now: float, told: Callable[[Pod], None]) -> None:
        """One pass over its queue; `told(pod)` for each pod it bound or found no room for."""
        if any(until <= now for until, _, _ in self.ghosts):
            self.ghosts = [g for g in self.ghosts if g[0] > now]
            self.parked.clear()  # AssignedPodDelete: every unschedulable pod is tried again
        queue = []
        for p in self.api.pods.values():
            meta, spec = p["metadata"], p["spec"]
            if spec.get("schedulingGates") or spec.get("nodeName") or meta["uid"] in self.parked:
                continue
            at = self.ready.setdefault(meta["uid"], now + self.rng.uniform(*self.delay))
            if at <= now:
                queue.append((at, meta["name"], p))
        queue.sort(key=lambda q: (q[0], q[1]))
        used = self._used()
        tried: set[str] = set()
        for _, _, p in queue:
            if p["metadata"]["uid"] in tried:
                continue
            gang = self._gang(p)
            if gang is None:
                self._one([p], used, told)
                tried.add(p["metadata"]["uid"])
            elif all(self.ready.get(q["metadata"]["uid"], now + 1) <= now for q in gang):
                self._one(gang, used, told)  # Permit: all of them or none
                tried |= {q["metadata"]["uid"] for q in gang}

    def _gang(self, p: Pod) -> list[Pod] | None:
        name = named_group(p["spec"])
        if not self.native or not name:
            return None
        key = (p["metadata"]["namespace"], name)
        if key not in self.api.podgroups:
            return []  # PreEnqueue: waits for its PodGroup (never all ready: tried later)
        want = self.api.podgroups[key]["spec"]["schedulingPolicy"]["gang"]["minCount"]
        members = [
            q
            for q in self.api.pods.values()
            if named_group(q["spec"]) == name and q["metadata"]["namespace"] == key[0]
        ]
        waiting = [q for q in members if not q["spec"].get("nodeName")]
        if len(members) < want or any(q["spec"].get("schedulingGates") for q in waiting):
            return []
        return waiting

    def _one(self, pods: list[Pod], used: dict[str, int], told: Callable[[Pod], None]) -> None:
        if not pods:
            return
        trial, picks = dict(used), []
        for p in pods:
            g = _gpus(p)
            uid = p["metadata"]["uid"]
            own = p.get("status", {}).get("nominatedNodeName")
            if own:  # its own nomination holds no room against itself (addNominatedPods)
                trial[own] -= g
            if uid not in self.admits:
                self.admits[uid] = tuple(n for n, x in self.nodes.items() if pod_admits(p, x, n))
            matching = len(self.admits[uid])
            fits = [n for n in self.admits[uid] if self.gpus - trial[n] >= g]
            if not fits:
                for q in pods:
                    self._unschedulable(q, len(self.nodes) - matching, matching)
                    told(q)
                return
            most = max(self.gpus - trial[n] for n in fits)  # LeastAllocated, ties at random
            n = self.rng.choice(sorted(n for n in fits if self.gpus - trial[n] == most))
            if own in fits:  # its nominated node first, as kube-scheduler tries it
                n = own
            trial[n] += g
            picks.append((p, n))
        used.update(trial)
        for p, n in picks:
            p["spec"]["nodeName"] = n
            p["status"] = {"phase": "Running", "conditions": [_scheduled("True", "", "")]}
            told(p)

    def _unschedulable(self, p: Pod, affinity: int, full: int) -> None:
        parts = []
        if affinity:
            parts.append(f"{affinity} node(s) didn't match Pod's node affinity/selector")
        if full:
            parts.append(f"{full} Insufficient nvidia.com/gpu")
        text = f"0/{len(self.nodes)} nodes are available: {', '.join(parts)}."
        p["status"] = {
            "phase": "Pending",
            "conditions": [_scheduled("False", "Unschedulable", text)],
        }
        self.parked.add(p["metadata"]["uid"])


def _scheduled(status: str, reason: str, message: str) -> dict[str, str]:
    return {"type": "PodScheduled", "status": status, "reason": reason, "message": message}


def _gpus(pod: Pod) -> int:
    return sum(
        int(c["resources"].get("limits", {}).get("nvidia.com/gpu", 0))
        for c in pod["spec"]["containers"]
    )


@dataclass
class Burst:
    """What one burst came to."""

    gangs: int
    placed: int  # gangs with every member bound
    partly: int  # gangs left partly bound at the end
    bound_at: dict[str, float]  # gang -> seconds from the burst to all bound
    events: list[tuple[str, str, str]]


class World:
    """`nodes` 8-GPU nodes in leaves of 4, first all running an earlier burst's pods."""

    def __init__(
        self,
        nodes: int = 64,
        seed: int = 1,
        native: bool = False,
        after: float = 60.0,
        lag: tuple[float, float] = (0.5, 4.0),
        delay: tuple[float, float] = (0.0, 2.0),
        leaf: int = 4,
        spine_leaves: int = 16,
    ) -> None:
        self.now = 0.0
        self.rng = random.Random(seed)
        self.native = native
        self.api = GangApi()
        self.gang = NativeGang(self.api)
        self.gang.book.set_served("v1alpha2" if native else "")
        self.watch = PartlyBound(self.api, after=after)  # the partly-bound watch
        ext = Extensions(gang=self.gang, partly=self.watch)
        self.placer = Placer(self.api, clock=lambda: self.now, extensions=ext)
        objs = fabric(nodes, leaf=leaf, spine_leaves=spine_leaves)
        self.placer.nodes_listed(objs)
        labels = {o["metadata"]["name"]: o["metadata"]["labels"] for o in objs}
        self.scheduler = Scheduler(self.api, labels, self.rng, delay, lag, native)
        self.templates: dict[str, Pod] = {}  # member name -> as its Job makes it
        self.again: list[tuple[float, str, int]] = []  # (when, original name, attempt)
        self.bound_at: dict[str, float] = {}  # gang -> seconds from the burst to all bound
        self.started = 0.0
        earlier = [
            self.api.create(
                gpu_pod(f"old-{i}", 8, namespace="earlier", node_name=n, phase="Running")
            )
            for i, n in enumerate(sorted(labels))
        ]
        self.placer.pods_listed(earlier)

    def waiting_pods(self, count: int) -> None:
        """Pods of other tenants, pending for room (kube-scheduler tries them first)."""
        for i in range(count):
            p = gpu_pod(f"other-{i}", 8, namespace="others")
            p["metadata"]["creationTimestamp"] = "2026-11-28T00:00:00Z"
            self.scheduler.ready[p["metadata"]["uid"]] = -1.0  # queued long before the burst
            self.placer.pod_event("ADDED", self.api.create(p))

    def delete_earlier(self) -> None:
        for p in [p for p in self.api.pods.values() if p["metadata"]["namespace"] == "earlier"]:
            self.api.remove(p)
        self._tell()

    def create(self, pod: Pod, native: bool | None = None) -> None:
        """`pod` as the webhook admits it; `native`: whether it names its PodGroup, where not as
        the world's (a member admitted before PodGroups were known served names none)."""
        self.templates[pod["metadata"]["name"]] = copy.deepcopy(pod)
        named = self.native if native is None else native
        self.placer.pod_event("ADDED", self.api.create(admitted(pod, named)))

    def _tell(self) -> None:
        """The watches report deleted pods: the placer at once, the Job controller's remake."""
        for p in self.api.gone:
            self.placer.pod_event("DELETED", p)
            self.scheduler.deleted(p, self.now)
            name = p["metadata"].get("labels", {}).get("burst.test/member", p["metadata"]["name"])
            if name in self.templates:  # a member evicted: its Job makes it again
                tries = sum(1 for _, n, _ in self.again if n == name) + 1
                self.again.append((self.now + 1.0, name, tries))
        self.api.gone = []

    def _remake(self) -> None:
        due = [a for a in self.again if a[0] <= self.now]
        self.again = [a for a in self.again if a[0] > self.now]
        for _, name, tries in due:
            pod = copy.deepcopy(self.templates[name])
            pod["metadata"]["name"] = f"{name}-r{tries}"
            pod["metadata"]["uid"] = f"uid-{name}-r{tries}"
            pod["metadata"]["labels"]["burst.test/member"] = name
            self.placer.pod_event("ADDED", self.api.create(admitted(pod, self.native)))

    def run(
        self, until: float, step: float = 0.25, done: Callable[[], bool] = lambda: False
    ) -> None:
        while self.now < until and not done():
            self._remake()
            self.placer.reconcile()
            self._feed()
            self.scheduler.step(self.now, self._scheduled)
            self._tell()
            self.now += step

    def _feed(self) -> None:
        """The pod watch reports what the placer patched."""
        for key in self.api.changed:
            if key in self.api.pods:
                self.placer.pod_event("MODIFIED", self.api.pods[key])
        self.api.changed = []

    def _scheduled(self, pod: Pod) -> None:
        """The pod watch reports what kube-scheduler did; a gang all bound is timed."""
        self.placer.pod_event("MODIFIED", pod)
        group = pod["metadata"].get("labels", {}).get("gpufabric.io/group")
        if not pod["spec"].get("nodeName") or group is None or group in self.bound_at:
            return
        size = int(pod["metadata"]["annotations"]["gpufabric.io/group-size"])
        on = sum(
            1
            for p in self.api.pods.values()
            if p["spec"].get("nodeName")
            and p["metadata"].get("labels", {}).get("gpufabric.io/group") == group
        )
        if on == size:
            self.bound_at[group] = self.now - self.started

    def outcome(self, groups: list[str]) -> Burst:
        placed = partly = 0
        for g in groups:
            pods = [
                p
                for p in self.api.pods.values()
                if p["metadata"].get("labels", {}).get("gpufabric.io/group") == g
            ]
            on = [p for p in pods if p["spec"].get("nodeName")]
            size = int(pods[0]["metadata"]["annotations"]["gpufabric.io/group-size"]) if pods else 0
            if len(on) == size and size:
                placed += 1
            elif on:
                partly += 1
        bound_at = {g: t for g, t in self.bound_at.items() if g in groups}
        return Burst(len(groups), placed, partly, bound_at, list(self.api.events))
