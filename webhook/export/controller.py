"""The exports in the cluster: keep each asked-for kind's objects equal to the fabric.

Inputs: the fabric's current Positions and each node's NVLink domain, both the labeler's own
(webhook.fabric.controller), so objects and labels cannot differ; the GpuNodeStatus and Node feeds
only say when both have been listed once.
`sync()` (the leader's loop) writes only what differs from what the cluster holds:

- server-side apply as gpufabric-labeler of every wanted object that is missing or different, each
  labelled `app.kubernetes.io/managed-by: gpufabric` ("ours");
- delete ours that the fabric no longer has; never touch an object without that label, even one
  with a name we want (that name is reported instead);
- a Topology whose levels must change is deleted and created again (Kueue and KAI refuse level
  changes in place);
- a fabric that places no node exports nothing and deletes nothing (a bad source keeps the last
  good positions upstream already): the last good objects stay;
- a kind the cluster does not serve is skipped and looked up again every `recheck` seconds;
  condition `Exported` on GpuFabric `cluster` says which (reason `APINotServed`).

Nothing is written when nothing changed: a kind is listed again only when its wanted objects
change, after a failure, or every `resync` seconds (to repair objects somebody edited or deleted).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from webhook.export.kinds import Kind
from webhook.export.model import MANAGED_BY, MANAGER, Model, build
from webhook.fabric.levels import Positions

log = logging.getLogger(__name__)

CONDITION = "Exported"
Obj = Mapping[str, Any]


class ExportError(Exception):
    """The API server refused or failed a request (its status and message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class ExportApi(Protocol):
    def served(self, kind: Kind) -> str | None:
        """The first of kind.versions the cluster serves kind.plural in; None: none."""
        ...

    def list(self, kind: Kind, version: str) -> list[Obj]: ...

    def apply(self, kind: Kind, version: str, body: Obj) -> None:
        """Server-side apply as gpufabric-labeler (force)."""
        ...

    def delete(self, kind: Kind, version: str, name: str) -> None: ...


def contains(have: Any, want: Any) -> bool:
    """`have` holds every field of `want` with the same value (the server may add more)."""
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(
            k in have and contains(have[k], v) for k, v in want.items()
        )
    if isinstance(want, list):
        return (
            isinstance(have, list)
            and len(have) == len(want)
            and all(contains(h, w) for h, w in zip(have, want, strict=True))
        )
    return bool(have == want)


def ours(obj: Obj) -> bool:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) == MANAGER


def _level_labels(obj: Obj) -> list[Any]:
    return [lvl.get("nodeLabel") for lvl in (obj.get("spec") or {}).get("levels") or []]


class Exporter:
    def __init__(
        self,
        exports: ExportApi,
        kinds: Sequence[Kind],
        positions: Callable[[], Positions],
        condition: Callable[[str, Mapping[str, str]], None],
        domains: Callable[[], Mapping[str, str]],
        *,
        resync: float = 300.0,
        recheck: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.exports, self.kinds = exports, tuple(kinds)
        self.positions, self.condition, self.domains = positions, condition, domains
        self.resync, self.recheck, self.clock = resync, recheck, clock
        self._lock = threading.Lock()
        self._built: tuple[Positions, Mapping[str, str]] | None = None
        self._model: Model | None = None
        self._generation = 0  # counts rebuilt models
        self._synced: dict[str, int] = {}  # target -> the generation it was converged to
        self._due: dict[str, float] = {}  # target -> next unconditional look
        self._state: dict[str, str] = {}  # target -> "" ok | "unserved" | error text
        self._listed = {"statuses": False, "nodes": False}  # nothing before both feeds listed
        self.writes = 0

    # -- inputs (any thread) ---------------------------------------------------------------
    def listed(self, feed: str) -> None:
        """The GpuNodeStatus ("statuses") or Node ("nodes") feed has listed once: until both
        have, the NVLink domains are half known and nothing is written."""
        with self._lock:
            self._listed[feed] = True

    # -- the leader's work -----------------------------------------------------------------
    def model(self) -> Model | None:
        """The wanted model; None while the fabric places no node (keep what is there)."""
        inputs = (self.positions(), self.domains())
        if self._built is None or self._built[0] is not inputs[0] or self._built[1] != inputs[1]:
            self._built, self._model = inputs, build(*inputs)
            self._generation += 1
        return self._model if self._model is not None and self._model.placed else None

    def sync(self) -> int:
        """One round over every kind that is due; returns the writes it made."""
        with self._lock:
            if not all(self._listed.values()):
                return 0  # the feeds' first lists decide the NVLink domains: wait for them
        before = self.writes
        model = self.model()
        now = self.clock()
        for kind in self.kinds:
            fresh = model is not None and self._synced.get(kind.target) != self._generation
            waiting = not fresh or self._state.get(kind.target)  # unserved or failed: back off
            if waiting and now < self._due.get(kind.target, 0.0):
                continue
            self._sync_kind(kind, model, now)
        self._report()
        return self.writes - before

    def run(self, stop: threading.Event, period: float = 1.0) -> None:
        """The leader's loop. A new term starts by looking at everything: while another replica
        led, the cluster may have changed."""
        self._synced.clear()
        self._due.clear()
        while not stop.is_set():
            try:
                self.sync()
            except Exception as err:  # noqa: BLE001 - never let one bad round end the exports
                log.warning("export round failed", extra={"error": str(err)})
            stop.wait(period)

    # -- helpers ---------------------------------------------------------------------------
    def _sync_kind(self, kind: Kind, model: Model | None, now: float) -> None:
        target = kind.target
        try:
            version = self.exports.served(kind)
            if version is None:
                if self._state.get(target) != "unserved":
                    log.warning("export skipped: API not served", extra={"kind": kind.title})
                self._state[target] = "unserved"
                self._due[target] = now + self.recheck
                self._synced.pop(target, None)
                return
            problems = []
            if model is not None:
                problems = self._converge(kind, version, kind.objects(model, version))
                self._synced[target] = self._generation
            self._state[target] = "; ".join(problems)
            self._due[target] = now + (self.recheck if problems else self.resync)
        except Exception as err:  # noqa: BLE001 - API down, refused, schema error: retry later
            message = str(err)
            if self._state.get(target) != message:
                log.warning("export failed", extra={"kind": kind.title, "error": message})
            self._state[target] = message
            self._due[target] = now + self.recheck

    def _converge(self, kind: Kind, version: str, wanted: list[dict[str, Any]]) -> list[str]:
        """Write what differs; returns the names we may not write (held by somebody else)."""
        existing = {str(o["metadata"]["name"]): o for o in self.exports.list(kind, version)}
        names, problems = set(), []
        for want in wanted:
            name = want["metadata"]["name"]
            names.add(name)
            have = existing.get(name)
            if have is not None and not ours(have):
                problems.append(f"{name} exists without {MANAGED_BY}: {MANAGER}; left alone")
                continue
            if have is not None and contains(have, want):
                continue
            if (
                have is not None
                and kind.replace_on_level_change
                and _level_labels(have) != _level_labels(want)
            ):
                self.exports.delete(kind, version, name)
                self.writes += 1
                log.info("export replaced (levels changed)", extra={"kind": kind.title})
            self.exports.apply(kind, version, want)
            self.writes += 1
        for name, have in existing.items():
            if name not in names and ours(have):
                self.exports.delete(kind, version, name)
                self.writes += 1
        return problems

    def _report(self) -> None:
        unserved = [k.title for k in self.kinds if self._state.get(k.target) == "unserved"]
        failed = [
            f"{k.title}: {self._state[k.target]}"
            for k in self.kinds
            if self._state.get(k.target, "") not in ("", "unserved")
        ]
        if unserved:
            new = {
                "status": "False",
                "reason": "APINotServed",
                "message": "the cluster does not serve " + ", ".join(unserved),
            }
        elif failed:
            new = {"status": "False", "reason": "ExportFailed", "message": "; ".join(failed)}
        elif self._model is None or not self._model.placed:
            new = {
                "status": "Unknown",
                "reason": "NothingPlaced",
                "message": "the fabric places no node: nothing exported, nothing deleted",
            }
        else:
            titles = ", ".join(k.title for k in self.kinds)
            new = {"status": "True", "reason": "Exported", "message": f"exported {titles}"}
        self.condition(CONDITION, new)
