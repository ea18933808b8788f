"""Waiting on a real cluster: poll until a condition holds, or fail saying what was awaited, for how
long, and what was last seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Timeout(AssertionError):
    """A wait ran out; the message names what was awaited and the last value seen."""


def wait_until(
    probe: Callable[[], T | None], timeout: float, what: str, interval: float = 0.2
) -> T:
    """The first truthy value `probe` returns within `timeout` seconds, else Timeout. An
    exception from `probe` counts as not yet (kept as the last value seen)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = probe()
        except Exception as err:  # noqa: BLE001 - the API answering 404 or 409 mid-change
            value, last = None, err
        else:
            last = value
            if value:
                return value
        if time.monotonic() >= deadline:
            raise Timeout(f"{what}: not within {timeout:.0f}s (last seen: {last!r})"[:2000])
        time.sleep(interval)
