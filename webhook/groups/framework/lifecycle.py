"""The one lifecycle of the objects a group owns, whatever their kind (a PodGroup, a
ComputeDomain; DESIGN.md notes C: controller-runtime's owned objects): made before the group's
gate is lifted; kept while it is ours, for this group, and names the members' controller by UID;
adopted (made to name that controller) where an earlier controller of the same name made it;
made again when lost while the group still needs it; deleted, the placer's finalizer off first,
once the group's last member is gone. What differs is data (owned.OwnedKind) or the extension's
own: the body, the spec its group needs now, and which groups need one. Every write goes
through OwnedApi (ownedkube.KubeOwnedApi: one error mapping for every kind)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any, Generic, Protocol

from webhook.groups.framework.owned import Book, R, adoption, verdict, waiting_words
from webhook.groups.framework.points import Ready
from webhook.groups.framework.writes import NotWritten
from webhook.groups.model.names import GroupKey
from webhook.groups.model.pods import Owner

log = logging.getLogger(__name__)
Counted = Callable[[int, int], None]  # (made, deleted) as they happen: the kind's metric
# Writes.add of the reconcile's batch (groups/framework/writes.py): the call, then what hears its
# result
AddWrite = Callable[[Callable[[], object], Callable[[object], None]], None]


class OwnedApi(Protocol):
    """The writes of one kind (ownedkube.KubeOwnedApi); each raises refusals.Rejected where the
    API server refuses it (any 4xx but those named)."""

    def create_owned(self, namespace: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """The created object; where one of its name exists already (409), that one read back,
        whosever it is: the lifecycle judges."""

    def patch_owned(
        self, namespace: str, name: str, version: str, patch: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """A merge patch (metadata.uid in it: only that object); the object as patched."""

    def delete_owned(self, namespace: str, name: str, uid: str, version: str) -> None:
        """Delete it if it is still that object (a precondition on the UID); gone is fine."""

    def release_owned(self, namespace: str, name: str, uid: str, version: str, index: int) -> None:
        """Remove the placer's finalizer, metadata.finalizers[index], if it is still there on
        that object; gone is fine."""


def fits_any(_: object) -> bool:
    return True


def no_change(_: object) -> Mapping[str, Any]:
    return {}


class Lifecycle(Generic[R]):
    """The objects of one kind that groups own: `book` (kept by its watch) and their writes."""

    def __init__(self, book: Book[R], api: OwnedApi | None, counted: Counted | None = None):
        self.book, self.api, self.counted, self.kind = book, api, counted, book.kind
        if api is None:
            book.unserved()  # no API: nothing is served (tests of plain groups)
        # asked for (early, or by `making`), not answered yet: who waits for each answer
        self._asked: dict[tuple[str, str], list[Callable[[object], None]]] = {}
        # answered as not the group's (or not at all): `own` makes the next tries, and says why,
        # until it has the group's (kept while the group lives)
        self._by_own: dict[tuple[str, str], GroupKey] = {}
        self._left: set[GroupKey] = set()  # ours a sweep left to look at again
        self._word = self.kind.kind.lower()  # in logs: podgroup, computedomain

    def blocked(
        self,
        key: GroupKey,
        name: str,
        owner: Owner | None,
        fits: Callable[[R], bool] = fits_any,
        fit: Callable[[R], Mapping[str, Any] | str] = no_change,
    ) -> str:
        """Why the group cannot have the object of `name`, as far as the book tells without a
        write ('' where it can: there is none, or it is the group's, or an earlier owner's to
        adopt): it is not ours, or ours but not what the group needs (`fits` False), or it is
        being deleted and the kind serves no group then, or `fit` says why the group waits.
        `owner`: the members' shared controller (owned.verdict)."""
        have = self.book.by_name.get((key[0], name))
        v = verdict(None if have is None else have.found, key[1], owner)
        if have is not None and v != "foreign" and not fits(have):
            v = "foreign"
        if v == "foreign" or (v == "deleting" and not self.kind.serves_deleted):
            return waiting_words(v, self.kind.kind, name, key[0])
        spec = fit(have) if have is not None else {}
        return spec if isinstance(spec, str) else ""

    def own(
        self,
        key: GroupKey,
        name: str,
        owner: Owner | None,
        body: Callable[[], Mapping[str, Any]],
        fits: Callable[[R], bool] = fits_any,
        fit: Callable[[R], Mapping[str, Any] | str] = no_change,
    ) -> R | str:
        """The group's object of `name`: made where there is none (`body()`), adopted where an
        earlier owner's (its ownerReference set to `owner`, so that the earlier one's deletion
        cannot take it away), else kept; `fit(it)`: the spec the group needs now (a merge patch,
        sent with the adoption) or why it waits. A str: why the group waits (`blocked`). Raises
        refusals.Rejected where the API server refuses a write."""
        assert self.api is not None  # noqa: S101 - served implies an API
        why = self.blocked(key, name, owner, fits, fit)
        if why:
            return why
        have = self.book.by_name.get((key[0], name))
        if have is None:
            made = self.api.create_owned(key[0], body())
            self.book.event("ADDED", made)  # (answered 409: the one there, judged as any)
            have = self.book.read(made)
            if have is None:  # one the kind's watch does not keep: not ours
                return waiting_words("foreign", self.kind.kind, name, key[0])
            why = self.blocked(key, name, owner, fits)
            if why:
                return why
            if self.counted is not None and verdict(have.found, key[1], owner) == "keep":
                self.counted(1, 0)
        v = verdict(have.found, key[1], owner)
        patch = adoption(have.found.uid, owner) if v == "earlier" else {}
        spec = fit(have)
        if isinstance(spec, str):
            return spec
        if spec:
            patch = {**(patch or {"metadata": {"uid": have.found.uid}}), **spec}
        if patch:
            patched = self.api.patch_owned(key[0], name, self.book.version, patch)
            self.book.event("MODIFIED", patched)
            have = self.book.read(patched) or have
        self._by_own.pop((key[0], name), None)  # the group's now: made in the background again
        return have

    def early(
        self, key: GroupKey, name: str, body: Callable[[], Mapping[str, Any]], add: AddWrite
    ) -> None:
        """Asked for with the reconcile's other writes (`add`: Writes.add) before the group is
        whole, so that `own` finds it made (made there, its round trip would stand between the
        last member and the ungating; issue 38). Once until answered; a failure is only logged:
        `own` makes it then."""
        where = (key[0], name)
        if self.api is None or self.book.served is not True:
            return
        if where in self._asked or where in self.book.by_name or where in self._by_own:
            return
        self._ask(key, where, body, add)

    def making(
        self,
        key: GroupKey,
        name: str,
        owner: Owner | None,
        body: Callable[[], Mapping[str, Any]],
        add: AddWrite,
        fit: Callable[[R], Mapping[str, Any] | str] = no_change,
    ) -> Ready | None:
        """The group's object where there is none yet, made without waiting for it: asked for
        with the reconcile's writes (or already asked, early), and the answer a `Ready` that
        says when it is made and the group's. Why: a create made here on the placer's one thread
        held every other group's decision for its round trip (30-50 ms each on a busy API
        server, bench/bind_bench.py), and one asked early and still on its way was asked again
        (409). None where the book has one already (`own` keeps or adopts it)."""
        where = (key[0], name)
        if self.api is None or where in self.book.by_name:
            return None
        if where in self._by_own:  # not asked again and again in the background
            return None
        if where not in self._asked:
            self._ask(key, where, body, add)

        def ready(tell: Callable[[Exception | None], None]) -> None:
            waiting = self._asked.get(where)
            if waiting is None:  # answered already (cannot happen on the one thread): judged now
                tell(self._judged(key, name, owner, fit, None))
                return
            waiting.append(lambda result: tell(self._judged(key, name, owner, fit, result)))

        return ready

    def _ask(
        self,
        key: GroupKey,
        where: tuple[str, str],
        body: Callable[[], Mapping[str, Any]],
        add: AddWrite,
    ) -> None:
        """The create, with the reconcile's writes; its answer heard by `_made`."""
        assert self.api is not None  # noqa: S101 - served implies an API
        self._asked[where] = []
        add(partial(self.api.create_owned, key[0], body()), partial(self._made, key, where))

    def _judged(
        self,
        key: GroupKey,
        name: str,
        owner: Owner | None,
        fit: Callable[[R], Mapping[str, Any] | str],
        result: object,
    ) -> Exception | None:
        """A create's answer for a group that waits for it: None where the object is now the
        group's as it needs it (kept), else why not (and `own` makes the next tries)."""
        why = result if isinstance(result, Exception) else None
        if why is None:
            have = self.book.by_name.get((key[0], name))
            v = verdict(None if have is None else have.found, key[1], owner)
            if have is None or v != "keep":  # a 409 answered with another's, or one to adopt
                v = "foreign" if have is None else v
                why = NotWritten(waiting_words(v, self.kind.kind, name, key[0]))
            elif spec := fit(have):  # to change or to wait for: `own` does it
                words = spec if isinstance(spec, str) else f"{self.kind.kind} {name} to fit"
                why = NotWritten(words)
        if why is not None:
            self._by_own[(key[0], name)] = key
        return why

    def _made(self, key: GroupKey, where: tuple[str, str], result: object) -> None:
        waiting = self._asked.pop(where, [])
        if isinstance(result, Mapping):
            known = where in self.book.by_name
            self.book.event("ADDED", result)  # the kind's read keeps it or not
            if self.book.read(result) is None:  # a 409 answered with one not ours
                self._by_own[where] = key
            elif not known and self.counted is not None:
                self.counted(1, 0)
        elif isinstance(result, Exception):  # `own` makes the next tries: a refusal is told
            log.warning("%s not made early", self._word, extra={"object": where, "error": result})
            self._by_own[where] = key
        for tell in waiting:
            tell(result)

    def again(self, key: GroupKey, name: str, own: Callable[[], object]) -> None:
        """Made again where it is lost (deleted by hand, or by the garbage collector) while the
        group still needs it: `own` is the group's own path (`own` above, with what the
        extension asks); a failure is asked again at the next reconcile."""
        if (key[0], name) in self.book.by_name:
            return
        where = f"{key[0]}/{name}"
        try:
            why = own()
        except Exception:  # noqa: BLE001 - asked again at the next reconcile
            log.warning("%s not made again", self._word, extra={"object": where})
            return
        if isinstance(why, str) and why:
            log.info("%s not made again", self._word, extra={"object": where, "why": why})

    def sweep(
        self,
        groups: Container[GroupKey],
        in_use: Callable[[R], bool] = fits_any,
        changed: Iterable[GroupKey] | None = None,
    ) -> list[R]:
        """Ours whose group has no pod left: the placer's finalizer off, then deleted (the
        garbage collector may have deleted it with the members' controller already: the
        finalizer held it until now). One being deleted while its group lives and none of the
        group uses it (`in_use` False: the members' controller was made again) is let go, and
        made anew once gone. `groups`: the live groups, from a pod list that answered.
        `changed`: the groups whose pods changed since the last sweep (None, or after a list of
        the kind: every object of ours); those, the ones whose object changed and those left
        from the last sweep are looked at, not every object (8,192 PodGroups: 20 ms a tick).
        Returns those whose group is gone (until the watch says they are)."""
        self._by_own = {w: k for w, k in self._by_own.items() if k in groups}
        book = self.book
        if not book.served:
            return []
        if changed is None or book.fresh:
            book.fresh, book.touched, self._left = False, set(), set()
            looks = book.ours()
        else:
            keys = self._left | book.touched
            keys.update(changed)
            book.touched, self._left = set(), set()
            looks = [r for k in keys if (r := self._of(k)) is not None]
        deleted = 0
        for r in looks:
            key = (r.namespace, str(r.found.group))
            if key in groups:
                if r.found.deleting and not in_use(r) and not self._release(r):
                    self._left.add(key)  # asked again at the next sweep
                continue
            self._left.add(key)  # until the watch says it is gone
            if self._release(r) and not r.found.deleting and self._delete(r):
                deleted += 1
        if deleted and self.counted is not None:
            self.counted(0, deleted)
        return [r for k in self._left if k not in groups and (r := self._of(k)) is not None]

    def _of(self, key: GroupKey) -> R | None:
        where = self.book.by_group.get(key)
        return None if where is None else self.book.by_name.get(where)

    def _release(self, r: R) -> bool:
        """The placer's finalizer off (True when it is, or was never there)."""
        if not self.kind.finalizer or self.kind.finalizer not in r.finalizers:
            return True
        assert self.api is not None  # noqa: S101 - served implies an API
        index = r.finalizers.index(self.kind.finalizer)
        try:
            self.api.release_owned(r.namespace, r.name, r.found.uid, self.book.version, index)
        except Exception:  # noqa: BLE001 - retried on the next reconcile; counted as left over
            log.warning("%s finalizer not removed", self._word, extra={"object": _name(r)})
            return False
        kept = tuple(f for f in r.finalizers if f != self.kind.finalizer)
        self.book.by_name[(r.namespace, r.name)] = replace(r, finalizers=kept)
        return True

    def _delete(self, r: R) -> bool:
        assert self.api is not None  # noqa: S101 - served implies an API
        try:
            self.api.delete_owned(r.namespace, r.name, r.found.uid, self.book.version)
        except Exception:  # noqa: BLE001 - retried on the next reconcile; counted as left over
            log.warning("%s not deleted", self._word, extra={"object": _name(r)})
            return False
        have = self.book.by_name.get((r.namespace, r.name), r)
        self.book.by_name[(r.namespace, r.name)] = replace(have, deleting=True)
        return True


def _name(r: R) -> str:
    return f"{r.namespace}/{r.name}"
