"""The objects the placer makes for a group (its PodGroup, its ComputeDomain): labelled as ours
with the group they serve, and owned by the members' shared controller, so that deleting that
controller deletes them too. One lifecycle for both kinds (DESIGN.md notes C, controller-runtime's
owned objects; lifecycle.py runs it): an object of the group's name is adopted only when it is
ours, for this group and of the members' controller by UID (a Job deleted and made again under
the same name is another owner: the old object goes, a new one is made); one the group still
needs is made again when it is lost. Here: what a kind is (OwnedKind), whose an object is
(verdict), and the Book of a kind's objects kept from its list and watch. Pure."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import Field, dataclass
from typing import Any, ClassVar, Final, Generic, Literal, Protocol, TypeVar

from webhook.groups.model.names import LABEL_GROUP, PLACER_FIELD_MANAGER, GroupKey
from webhook.groups.model.pods import Owner

LABEL_MANAGED: Final = "app.kubernetes.io/managed-by"
OURS: Final = f"{LABEL_MANAGED}={PLACER_FIELD_MANAGER}"  # their label selector

# What the placer does with the object of a group's name (verdict):
# make: there is none; keep: ours, for this group, of the members' controller;
# deleting: it is being deleted (a finalizer may hold it while pods use it: the kind says
# whether it is still usable); earlier: ours for this group but of another owner (an earlier
# controller of the same name, or none): adopted by the `adoption` patch (its ownerReference
# set to the members' controller, so the earlier owner's deletion cannot take it away), not
# taken as it is; foreign: not ours (a user's, or unlabelled): left alone, the group waits and
# says so.
Verdict = Literal["make", "keep", "deleting", "earlier", "foreign"]


@dataclass(frozen=True, slots=True)
class OwnedKind:
    """A kind of object a group owns, as the API server serves it."""

    group: str
    plural: str
    kind: str  # in words, Events and waiting messages ("PodGroup")
    versions: tuple[str, ...]  # newest first: the first one the cluster serves is used
    # The watch lists only ours (by label) or every object of the kind (a user's ComputeDomain
    # declares channel templates the placer and admission read).
    only_ours: bool = True
    # A deleted one still serves its group while a finalizer holds it (kube-scheduler goes on
    # using a PodGroup that pods name): not waited for, never made anew meanwhile.
    serves_deleted: bool = False
    finalizer: str = ""  # the placer's, on each it makes: held until the last member is gone
    # spec fields sent only where the served CRD requires them: a create refused with 422 naming
    # one is sent again with it, and so is every later one (numNodes, before the driver's v0.4)
    optional: tuple[str, ...] = ()

    @property
    def resource(self) -> str:
        return f"{self.plural}.{self.group}"


@dataclass(frozen=True, slots=True)
class Found:
    """An object of a group's name as listed: whose it is."""

    uid: str
    group: str | None  # the group it serves when the placer made it (our labels), else None
    owner_uid: str  # the UID of the owner it names ("" for none)
    deleting: bool = False


def owned_meta(namespace: str, name: str, group: str, owner: Owner | None) -> dict[str, Any]:
    """The metadata of an object made for `group`."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {LABEL_GROUP: group, LABEL_MANAGED: PLACER_FIELD_MANAGER},
    }
    if owner is not None:  # deleting the members' controller deletes the object too
        meta["ownerReferences"] = _references(owner)
    return meta


def _references(owner: Owner) -> list[dict[str, Any]]:
    api_version, kind, owner_name, uid = owner
    return [{"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": uid}]


def adoption(uid: str, owner: Owner | None) -> dict[str, Any]:
    """The merge patch that makes an object of ours (verdict "earlier") the group's: its
    ownerReferences the members' controller's (none for bare pods), only while it is still
    that object (metadata.uid in a patch is a precondition: 409 otherwise)."""
    refs = _references(owner) if owner is not None else None
    return {"metadata": {"uid": uid, "ownerReferences": refs}}


def our_group(meta: Mapping[str, Any]) -> str | None:
    """The group an object serves when the placer made it, else None."""
    labels = meta.get("labels") or {}
    group = labels.get(LABEL_GROUP)
    if labels.get(LABEL_MANAGED) != PLACER_FIELD_MANAGER or not group:
        return None
    return str(group)


def owner_uid(meta: Mapping[str, Any]) -> str:
    """The UID of the owner an object names (owned_meta writes one ownerReference at most)."""
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, Mapping) and ref.get("uid"):
            return str(ref["uid"])
    return ""


def found_of(meta: Mapping[str, Any]) -> Found:
    return Found(
        uid=str(meta.get("uid") or ""),
        group=our_group(meta),
        owner_uid=owner_uid(meta),
        deleting=bool(meta.get("deletionTimestamp")),
    )


def verdict(found: Found | None, group: str, owner: Owner | None) -> Verdict:
    """What to do with the object of `group`'s name (None: there is none) for members whose
    shared controller is `owner` (None: bare pods, or members of several controllers: then only
    an object that names no owner is adopted)."""
    if found is None:
        return "make"
    if found.group != group:
        return "foreign"
    if found.deleting:
        return "deleting"
    if found.owner_uid != (owner[3] if owner is not None else ""):
        return "earlier"
    return "keep"


def waiting_words(v: Verdict, kind: str, name: str, namespace: str) -> str:
    """Why a group waits for its object of that verdict (make and keep: nothing to wait for)."""
    if v == "foreign":
        return (
            f"{kind} {name} exists in {namespace} and is not this group's (not made by "
            f"{PLACER_FIELD_MANAGER} for it); rename the group or that {kind}"
        )
    if v == "earlier":
        return (
            f"{kind} {name} was made for an earlier controller of this group (another owner "
            "UID); it is adopted or made again first"
        )
    if v == "deleting":
        return f"{kind} {name} is being deleted; it is made again after"
    return ""


def shared_owner(owners: Iterable[Owner | None]) -> Owner | None:
    """The controller every member shares; None where they have none or several."""
    found = set(owners)
    return found.pop() if len(found) == 1 else None


class Listed(Protocol):
    """One object of a kind as its Book keeps it (a frozen dataclass of the kind's own)."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]

    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def finalizers(self) -> tuple[str, ...]: ...

    @property
    def found(self) -> Found: ...


R = TypeVar("R", bound=Listed)


class Book(Generic[R]):
    """A kind's objects (those `read` keeps: None leaves one out), kept current from a list and
    watch (ownedkube.owned_watch), and whether and in which version the cluster serves the kind.
    Admission reads it from other threads: a list replaces `by_name` whole."""

    def __init__(self, kind: OwnedKind, read: Callable[[Mapping[str, Any]], R | None]) -> None:
        self.kind, self.read = kind, read
        self.served: bool | None = None  # None: not known yet (no list answered)
        self.version = ""  # the version served (kind.versions), "" when none
        self.by_name: dict[tuple[str, str], R] = {}
        # ours by the group each serves, and the groups whose object changed since the
        # lifecycle's last sweep (`fresh`: all of them, after a list), so a sweep looks at those
        self.by_group: dict[GroupKey, tuple[str, str]] = {}
        self.touched: set[GroupKey] = set()
        self.fresh = True

    def listed(self, items: Iterable[Mapping[str, Any]]) -> None:
        """A complete list: a list that answered is served, unless set_served said not."""
        if self.served is None:
            self.set_served(self.kind.versions[0])
        fresh: dict[tuple[str, str], R] = {}
        for obj in items:
            if (r := self.read(obj)) is not None:
                fresh[(r.namespace, r.name)] = r
        self.by_name = fresh
        self.by_group = {g: w for w, r in fresh.items() if (g := _served(r)) is not None}
        self.fresh = True

    def set_served(self, version: str) -> None:
        """The version of the kind the API server serves ("": none, every version answered
        HTTP 404)."""
        self.served, self.version = bool(version), version
        if not version:
            self.by_name, self.by_group, self.fresh = {}, {}, True

    def unserved(self) -> None:
        self.set_served("")

    def event(self, kind: str, obj: Mapping[str, Any]) -> None:
        r = self.read(obj)
        if r is None:
            return
        where, group = (r.namespace, r.name), _served(r)
        if kind == "DELETED":
            self.by_name.pop(where, None)
        else:
            self.by_name[where] = r
        if group is None:
            return
        self.touched.add(group)
        if kind != "DELETED":
            self.by_group[group] = where
        elif self.by_group.get(group) == where:
            del self.by_group[group]

    def ours(self) -> list[R]:
        """Those the placer made (labelled with the group they serve)."""
        return [r for r in self.by_name.values() if r.found.group is not None]


def _served(r: Listed) -> GroupKey | None:
    """The group an object of ours serves (None: not ours)."""
    return None if r.found.group is None else (r.namespace, r.found.group)
