"""List-then-watch with resume from resourceVersion, relist on 410 Gone, backoff on errors, and
how stale the resulting cache is.

A list arrives page by page (limit + continue, as the API server pages it) and goes to its `Sink`
one page at a time, so no more than one page of objects is ever decoded at once: `start` before the
first page of each try, `page` per page, `done` once the list is complete (what was not paged
since `start` is gone). A continue token that expired (HTTP 410) starts the list over, at once.

Transport-free: the kubernetes calls are injected (webhook/kube/client.py), so recorded event
sequences drive the same loop in tests. Catch-up after an outage: the backoff is capped at 4 s
(jitter included) and resets on the first successful list, so the cache is relisted within about
4 s of the API server answering again. While a watch fails the cache keeps serving its last good
state; `stale_seconds()` says for how long, and the log says when it has been failing for a while
and when it recovered.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from common.backoff import Backoff
from common.memory import release_memory

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]


class Gone(Exception):
    """The resourceVersion is too old (HTTP 410): list again."""


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Obj]
    version: str  # the list's resourceVersion: the watch resumes from the last page's


Lister = Callable[[], Iterable[Page]]  # the pages of one consistent list, in order
Watcher = Callable[[str], Iterable[Obj]]  # resourceVersion -> events {"type", "object"}


class Sink(Protocol):
    """Where a list goes, page by page."""

    def start(self) -> None:
        """A list begins (again, after an expired continue token: forget that try's pages)."""

    def page(self, items: list[Obj]) -> None:
        """The next page of objects."""

    def done(self) -> None:
        """The list is complete: objects not paged since `start` no longer exist."""


@dataclass(frozen=True, slots=True)
class Paged:
    """A Sink from three functions (a consumer that takes a list page by page)."""

    start: Callable[[], None]
    page: Callable[[list[Obj]], None]
    done: Callable[[], None]


@dataclass(slots=True)
class Gathered:
    """A Sink for a consumer that needs the whole list at once (few or small objects: claims, one
    ConfigMap, the placer's slim pods): its pages kept and handed over when the list is done."""

    on_list: Callable[[list[Obj]], None]
    _items: list[Obj] = field(default_factory=list)

    def start(self) -> None:
        self._items = []

    def page(self, items: list[Obj]) -> None:
        self._items += items

    def done(self) -> None:
        items, self._items = self._items, []
        self.on_list(items)


def one_page(sink: Sink, items: list[Obj]) -> None:
    """A whole list in one page (objects given offline, tests)."""
    sink.start()
    sink.page(items)
    sink.done()


def listed(lister: Lister, sink: Sink) -> str:
    """Send one whole list to `sink`; its resourceVersion. Gone when a continue token expired."""
    sink.start()
    version = ""
    for page in lister():
        sink.page(page.items)
        version = page.version
        del page
        release_memory()
    sink.done()
    return version


PROBE_BACKOFF = Backoff(base=0.5, cap=4.0)
STALE_WARNING_S = 30.0  # a failing watch says so once more after this long


class ListWatch:
    def __init__(
        self,
        name: str,
        lister: Lister,
        watcher: Watcher,
        on_list: Sink,
        on_event: Callable[[str, Obj], None],
        *,
        backoff: Backoff = PROBE_BACKOFF,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.name = name
        self.lister, self.watcher = lister, watcher
        self.on_list, self.on_event = on_list, on_event
        self.backoff = backoff
        self.clock = clock
        self.rng = rng or random.Random()  # noqa: S311 - jitter, not security
        self.relists = 0
        self.errors = 0
        self.failing_since: float | None = None  # None while the watch is healthy
        self._warned_stale = False

    def stale_seconds(self) -> float:
        """0 while connected; else how long the cache has not heard from the API server."""
        since = self.failing_since
        return 0.0 if since is None else max(0.0, self.clock() - since)

    def run(self, stop: threading.Event, wait: Callable[[float], object] | None = None) -> None:
        pause = wait or stop.wait
        failures = 0
        while not stop.is_set():
            try:
                version = listed(self.lister, self.on_list)
                self.relists += 1
                failures = 0
                self._recovered()
                while not stop.is_set():
                    version = self._watch(version)
            except Gone:  # an expired watch, or a continue token that expired mid-list
                log.info("watch expired; relisting", extra={"watch": self.name})
                continue
            except Exception as err:  # noqa: BLE001 - API server down or flaky: back off, retry
                failures += 1
                self.errors += 1
                delay = self.backoff.delay(failures, self.rng)
                self._failed(err, failures, delay)
                pause(delay)

    def _failed(self, err: Exception, failures: int, delay: float) -> None:
        now = self.clock()
        if self.failing_since is None:
            self.failing_since = now
        down = now - self.failing_since
        if failures == 1:
            log.warning(
                "watch failed; serving the last good cache while retrying",
                extra={"watch": self.name, "error": str(err), "delay": round(delay, 2)},
            )
        elif down >= STALE_WARNING_S and not self._warned_stale:
            self._warned_stale = True
            log.warning(
                "watch still failing; the cache is stale",
                extra={"watch": self.name, "stale_s": round(down, 1), "error": str(err)},
            )

    def _recovered(self) -> None:
        if self.failing_since is not None:
            log.info(
                "watch recovered; cache relisted",
                extra={
                    "watch": self.name,
                    "was_stale_s": round(self.clock() - self.failing_since, 1),
                },
            )
        self.failing_since = None
        self._warned_stale = False

    def _watch(self, version: str) -> str:
        for event in self.watcher(version):
            kind = str(event.get("type"))
            obj = event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise Gone()
                raise RuntimeError(f"watch error: {obj.get('message') or obj}")
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind != "BOOKMARK":
                self.on_event(kind, obj)
        return version
