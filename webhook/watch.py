"""List-then-watch with resume from resourceVersion, relist on 410 Gone, backoff on errors.

Transport-free: the kubernetes calls are injected (webhook/kube.py), so recorded event sequences
drive the same loop in tests.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]
Lister = Callable[[], tuple[list[Obj], str]]  # items, list resourceVersion
Watcher = Callable[[str], Iterable[Obj]]  # resourceVersion -> events {"type", "object"}


class Gone(Exception):
    """The resourceVersion is too old (HTTP 410): list again."""


class ListWatch:
    def __init__(
        self,
        name: str,
        lister: Lister,
        watcher: Watcher,
        on_list: Callable[[list[Obj]], None],
        on_event: Callable[[str, Obj], None],
        *,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
    ) -> None:
        self.name = name
        self.lister, self.watcher = lister, watcher
        self.on_list, self.on_event = on_list, on_event
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self.relists = 0
        self.errors = 0

    def run(self, stop: threading.Event) -> None:
        failures = 0
        while not stop.is_set():
            try:
                items, version = self.lister()
                self.on_list(items)
                self.relists += 1
                failures = 0
                while not stop.is_set():
                    version = self._watch(version)
            except Gone:
                log.info("watch expired; relisting", extra={"watch": self.name})
                continue
            except Exception as err:  # noqa: BLE001 - API server down or flaky: back off, retry
                failures += 1
                self.errors += 1
                delay = min(self.backoff_cap, self.backoff_base * 2 ** (failures - 1))
                delay *= random.uniform(0.5, 1.5)  # noqa: S311 - jitter
                log.warning(
                    "watch failed; retrying",
                    extra={"watch": self.name, "error": str(err), "delay": round(delay, 2)},
                )
                stop.wait(delay)

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
