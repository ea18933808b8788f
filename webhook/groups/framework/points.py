"""The placer's extension points, in the order a decision flows, and the runner that calls them.

As kube-scheduler's framework (pkg/scheduler/framework/interface.go): one small Protocol per
point; an extension (preemption, the native gang, IMEX channels, the partly-bound watch)
implements only the points it needs, keeps its state in its own package, and the placer runs
each point over the enabled extensions in the order of the one list (enabled.py). The
placer names no extension.

The points, as a group's decision meets them:
- what the extension watches: Watches (once, as serve's wiring starts the placer);
- inputs, as the cluster changes: Attach (once), Relisting, Seen, Gone, Synced;
- each reconcile, before the dirty groups are decided: Tick;
- one group's decision (a `Cycle`): Incomplete (members missing), Adjust (the request: a wait
  answer stops), Hide (what the group may not take, hidden from the view while it is decided,
  shown again after), NothingFits (it waits: words to add), Permit (checks that can make it
  wait, no side effect), PreBind (before ungating: objects the group needs are made, or asked
  for and the patches wait for them; a wait answer stops), Reserve (each member's seat, counted
  before its patch is answered; Unreserve when the patch is refused), Words (for the GroupPlaced
  Event), Settled (placed or gone).
At a point that answers (Adjust, Permit, PreBind) the first extension that says "wait" wins and
the rest are not asked, as a Filter or Permit status does. Every check that can make a group
wait runs at Permit, before the first PreBind side effect; what PreBind made stays the group's
while it lives (each extension deletes its own after the last member, at Tick).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.decision import Request, Waiting
from webhook.groups.decision.seating import Seat
from webhook.groups.framework.evictions import Budgets
from webhook.groups.model.names import GroupKey, Level
from webhook.groups.model.records import PodRecord

Undo = Callable[[], None]
Put = Callable[[Callable[[], None]], None]
# What a PreBind may answer for an object on its way: called with a callback, it calls that on
# the placer's thread once the object is made (None) or is not (why, as an Exception); the
# group's writes (nominations, then patches) go only after every one said None, and its patches
# are answered with that Exception else
Ready = Callable[[Callable[[Exception | None], None]], None]


class HostApi(Protocol):
    def patch_pod(
        self, namespace: str, name: str, ops: list[dict[str, Any]], dry_run: bool = False
    ) -> None:
        """A JSONPatch of a pod; raises refusals.Rejected when the API server refuses it."""

    def event(self, pod: Mapping[str, Any], reason: str, message: str, kind: str) -> None: ...

    def nominate(self, namespace: str, name: str, node: str) -> None:
        """status.nominatedNodeName of a pending pod: a hint, best effort (never raises)."""


class Host(Protocol):
    """What the placer lends its extensions (kube-scheduler's framework.Handle): read them at
    each call, the placer replaces `pods` and `groups` on a relist."""

    @property
    def api(self) -> HostApi: ...
    @property
    def view(self) -> CapacityView: ...
    @property
    def budgets(self) -> Budgets: ...  # the cluster's PodDisruptionBudgets
    @property
    def pods(self) -> Mapping[str, PodRecord]: ...
    @property
    def groups(self) -> Mapping[GroupKey, set[str]]: ...
    @property
    def waiting(self) -> Mapping[GroupKey, str]: ...  # why each group waits, at its last try
    @property
    def changed(self) -> Set[GroupKey]:
        """The groups a pod of which was seen or gone since the last Tick (all of them after a
        Pod list): a Tick looks at these, not at every group it follows."""

    @property
    def clock(self) -> Callable[[], float]: ...


class Queue(Protocol):
    def add(self, call: Callable[[], object], done: Callable[[object], None]) -> None:
        """A write made with the reconcile's others; `done` hears its result or exception."""


@dataclass(frozen=True, slots=True)
class Cycle:
    """One group's decision as every point of it reads it (kube-scheduler's CycleState)."""

    key: GroupKey
    recs: tuple[PodRecord, ...]  # its live members, by name
    gated: tuple[PodRecord, ...]  # those still gated, by name
    size: int  # its group-size
    within: tuple[Level, str] | None  # a placed group's recorded domain (replacements)
    writes: Queue  # the reconcile's writes


# -- what the extension watches -----------------------------------------------------------------
class Watch(Protocol):
    """One list+watch (webhook/kube/watch.ListWatch): runs on a thread named `name` until
    `stop` is set."""

    @property
    def name(self) -> str: ...
    def run(self, stop: threading.Event) -> None: ...


@dataclass(frozen=True, slots=True)
class Feeds:
    """What serve's wiring lends an extension's watches."""

    api_client: Any  # kubernetes.client.ApiClient: only the kube modules read it
    put: Put  # the placer's inbox: its one thread applies what a watch saw, so no locks
    changed: Callable[[], None]  # every waiting group is tried again


@runtime_checkable
class Watches(Protocol):
    def watches(self, feeds: Feeds) -> Sequence[Watch]:
        """The list+watches the extension's state needs, each feeding it through `feeds.put`
        (serve's wiring runs each on a thread of its own until the placer stops)."""


# -- inputs ------------------------------------------------------------------------------------
@runtime_checkable
class Attach(Protocol):
    def attach(self, host: Host) -> None:
        """Once, as the placer is made: what the extension reads of it."""


@runtime_checkable
class Relisting(Protocol):
    def relisting(self) -> None:
        """A Pod list begins: what was kept per pod is forgotten (Seen follows for each)."""


@runtime_checkable
class Seen(Protocol):
    def seen(self, rec: PodRecord) -> None:
        """A pod as the placer now knows it (listed, watched, or its own patch answered)."""


@runtime_checkable
class Gone(Protocol):
    def gone(self, uid: str) -> None: ...


@runtime_checkable
class Synced(Protocol):
    def synced(self) -> None:
        """The pods are listed: from now on a group without pods is truly gone."""


# -- each reconcile ----------------------------------------------------------------------------
@runtime_checkable
class Tick(Protocol):
    def tick(self) -> None:
        """Before the dirty groups are decided: sweeps and watches over every group."""


# -- one group's decision ----------------------------------------------------------------------
@runtime_checkable
class Incomplete(Protocol):
    def incomplete(self, cycle: Cycle) -> None:
        """Members are still missing (the group waits for them; kube-scheduler's PreEnqueue)."""


@runtime_checkable
class Adjust(Protocol):
    def adjust(self, cycle: Cycle, request: Request) -> Request | str:
        """The request as the extension needs it, or why the group waits (PreFilter)."""


@runtime_checkable
class Hide(Protocol):
    def hide(self, cycle: Cycle) -> Undo:
        """Take out of the view what the group may not have while it is decided (Filter); the
        answer puts it back."""


@runtime_checkable
class NothingFits(Protocol):
    def nothing_fits(self, cycle: Cycle, request: Request, decided: Waiting) -> str:
        """The group fits nowhere (PostFilter: preemption); words for its waiting message. Runs
        while Hide's view is still in place."""


@runtime_checkable
class Permit(Protocol):
    def permit(self, cycle: Cycle) -> str:
        """Why the seated group must still wait, '' when it may go; no side effect here."""


@runtime_checkable
class PreBind(Protocol):
    def prebind(self, cycle: Cycle) -> str | Ready:
        """Before the gates are lifted: what the group needs is made; why it waits, or '', or
        a Ready for what is being made (the group's writes wait for it, not the placer)."""


@runtime_checkable
class Reserve(Protocol):
    def reserve(self, rec: PodRecord, node: str) -> None:
        """The member counts as on `node` (its patch is on its way, or a restart found it
        ungated there)."""

    def unreserve(self, rec: PodRecord) -> None:
        """Its patch was refused: `rec` as it was before."""

    def fits(self, rec: PodRecord, node: str) -> bool:
        """Whether the member may be counted on `node` (a restart promising it again)."""


@runtime_checkable
class Nominate(Protocol):
    def nominates(self, rec: PodRecord) -> bool:
        """Whether kube-scheduler is told the member's node (its status.nominatedNodeName)
        before its gate goes (NominatedNodeNameForExpectation: the scheduler keeps it)."""


@runtime_checkable
class Words(Protocol):
    def words(self, cycle: Cycle, seats: Sequence[Seat]) -> str:
        """Words added to GroupPlaced."""


@runtime_checkable
class Settled(Protocol):
    def settled(self, key: GroupKey) -> bool:
        """The group is placed, or gone: what it held while it waited ends. True where it held
        something other groups may use now (a domain kept for it)."""


class Points:
    """Runs each point over the extensions that implement it, in the list's order (who
    implements what is found once, here)."""

    def __init__(self, extensions: Iterable[object]) -> None:
        self.all = tuple(extensions)
        self._watches = tuple(e for e in self.all if isinstance(e, Watches))
        self._attach = tuple(e for e in self.all if isinstance(e, Attach))
        self._relisting = tuple(e for e in self.all if isinstance(e, Relisting))
        self._seen = tuple(e for e in self.all if isinstance(e, Seen))
        self._gone = tuple(e for e in self.all if isinstance(e, Gone))
        self._synced = tuple(e for e in self.all if isinstance(e, Synced))
        self._tick = tuple(e for e in self.all if isinstance(e, Tick))
        self._incomplete = tuple(e for e in self.all if isinstance(e, Incomplete))
        self._adjust = tuple(e for e in self.all if isinstance(e, Adjust))
        self._hide = tuple(e for e in self.all if isinstance(e, Hide))
        self._nothing_fits = tuple(e for e in self.all if isinstance(e, NothingFits))
        self._permit = tuple(e for e in self.all if isinstance(e, Permit))
        self._prebind = tuple(e for e in self.all if isinstance(e, PreBind))
        self._reserve = tuple(e for e in self.all if isinstance(e, Reserve))
        self._nominate = tuple(e for e in self.all if isinstance(e, Nominate))
        self._words = tuple(e for e in self.all if isinstance(e, Words))
        self._settled = tuple(e for e in self.all if isinstance(e, Settled))

    def watches(self, feeds: Feeds) -> tuple[Watch, ...]:
        return tuple(w for e in self._watches for w in e.watches(feeds))

    def attach(self, host: Host) -> None:
        for e in self._attach:
            e.attach(host)

    def relisting(self) -> None:
        for e in self._relisting:
            e.relisting()

    def seen(self, rec: PodRecord) -> None:
        for e in self._seen:
            e.seen(rec)

    def gone(self, uid: str) -> None:
        for e in self._gone:
            e.gone(uid)

    def synced(self) -> None:
        for e in self._synced:
            e.synced()

    def tick(self) -> None:
        for e in self._tick:
            e.tick()

    def incomplete(self, cycle: Cycle) -> None:
        for e in self._incomplete:
            e.incomplete(cycle)

    def adjust(self, cycle: Cycle, request: Request) -> Request | str:
        for e in self._adjust:
            answer = e.adjust(cycle, request)
            if isinstance(answer, str):
                return answer  # the first wait wins: the rest are not asked
            request = answer
        return request

    def hide(self, cycle: Cycle) -> Undo:
        undos = [e.hide(cycle) for e in self._hide]

        def undo() -> None:
            for u in reversed(undos):
                u()

        return undo

    def nothing_fits(self, cycle: Cycle, request: Request, decided: Waiting) -> str:
        return "".join(e.nothing_fits(cycle, request, decided) for e in self._nothing_fits)

    def permit(self, cycle: Cycle) -> str:
        return next((why for e in self._permit if (why := e.permit(cycle))), "")

    def prebind(self, cycle: Cycle) -> str | tuple[Ready, ...]:
        """Why the group waits (the first extension that says so), else what it waits for
        before its patches go (none: they go at once)."""
        pending: list[Ready] = []
        for e in self._prebind:
            answer = e.prebind(cycle)
            if isinstance(answer, str):
                if answer:
                    return answer
            else:
                pending.append(answer)
        return tuple(pending)

    def reserve(self, rec: PodRecord, node: str) -> None:
        for e in self._reserve:
            e.reserve(rec, node)

    def unreserve(self, rec: PodRecord) -> None:
        for e in reversed(self._reserve):  # undone in the reverse order, as kube-scheduler
            e.unreserve(rec)

    def fits(self, rec: PodRecord, node: str) -> bool:
        return all(e.fits(rec, node) for e in self._reserve)

    def nominates(self, rec: PodRecord) -> bool:
        return any(e.nominates(rec) for e in self._nominate)

    def words(self, cycle: Cycle, seats: Sequence[Seat]) -> str:
        return "".join(e.words(cycle, seats) for e in self._words)

    def settled(self, key: GroupKey) -> bool:
        """True where an extension let go of something other groups may use now."""
        let_go = False
        for e in self._settled:
            let_go = e.settled(key) or let_go  # each is told, whatever the others said
        return let_go
