"""Natural order of names (`leaf2` < `leaf10`, `mlx5_2` < `mlx5_10`): one implementation for the
agent (HCAs, NVMe drives) and the webhook (switches, leaves, nodes), which cannot import each
other."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

_DIGITS = re.compile(r"(\d+)")
_RUN_LENGTH = 0x100  # a run's length character: above every ASCII character of a name


def natural_key(name: str) -> str:
    """Sort key with digit runs compared as numbers, so `leaf2` < `leaf10`, text lower-cased;
    names equal so (`leaf02`, `Leaf2`) are ordered by the name itself. One string compared, not
    a tuple of parts (65,536 node names sort in about half the time): each digit run becomes
    _sortable_run's text, and NUL NUL ends the natural part before the name breaks ties."""
    parts = _DIGITS.split(name.lower())
    parts[1::2] = map(_sortable_run, parts[1::2])  # cached: no Python call for a known run
    return "".join(parts) + "\0\0" + name


def natural_sorted(names: Iterable[str]) -> list[str]:
    return sorted(names, key=natural_key)


def natural_ranks(names: Iterable[str]) -> dict[str, int]:
    """Each distinct name -> its place in natural order, for sorting many small lists of these
    names by a number."""
    ordered = natural_sorted(set(names))
    return dict(zip(ordered, range(len(ordered)), strict=True))


@functools.lru_cache(maxsize=1 << 16)
def _sortable_run(run: str) -> str:
    """A digit run, without its leading zeros, becomes NUL, a character for its length, then
    its digits: NUL sorts before any character a name holds, as a shorter text part sorts
    first; a longer run is a larger number."""
    digits = run.lstrip("0") or "0"
    return "\0" + chr(_RUN_LENGTH + len(digits)) + digits
