"""Natural order of many names at once, with NumPy: the derive sorts every leaf domain's nodes,
65,536 names, and a key built per name in Python cost more than the rest of the sort.

The keys are the ones names.py builds one at a time (each digit run, without its leading zeros,
becomes NUL, a length byte above ASCII, then its digits; the name itself breaks ties), built
here for all names in one pass over their bytes joined.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from webhook.fabric.names import natural_sorted

_LONGEST_RUN = 0x7F  # a run's length byte is 0x80 + its length


def natural_ranks(names: Iterable[str]) -> dict[str, int]:
    """Each name -> its place in natural order (`natural_sorted`'s), for sorting many small
    lists of these names by a number."""
    unique = list(set(names))
    joined = "\n".join(unique)
    keys = _keys(joined, len(unique)) if joined.isascii() else None
    if keys is None:  # a name outside ASCII, or with a newline or a NUL: one at a time
        ordered = natural_sorted(unique)
    else:  # the name itself after NUL NUL breaks ties, as in names.py
        tails = map(b"\0\0".__add__, joined.encode("ascii").split(b"\n"))
        full = list(map(bytes.__add__, keys, tails))
        ordered = list(map(unique.__getitem__, sorted(range(len(full)), key=full.__getitem__)))
    return dict(zip(ordered, range(len(ordered)), strict=True))


def _keys(joined: str, count: int) -> list[bytes] | None:
    """Each name's natural part, from the names joined by newlines (None: not possible)."""
    if "\0" in joined or joined.count("\n") != count - 1:
        return None
    a = np.frombuffer(joined.lower().encode("ascii"), np.uint8)
    digit = (a >= ord("0")) & (a <= ord("9"))
    edges = np.diff(digit.astype(np.int8), prepend=0, append=0)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    # A run's leading zeros go (one stays when the run is all zeros).
    nonzero = np.flatnonzero(digit & (a != ord("0")))
    at = np.minimum(np.searchsorted(nonzero, starts), max(len(nonzero) - 1, 0))
    first = nonzero[at] if len(nonzero) else ends - 1
    first = np.where((first >= starts) & (first < ends), first, ends - 1)
    sizes = ends - first
    if (sizes > _LONGEST_RUN).any():
        return None
    dropped = np.zeros(len(a) + 1, np.int64)
    np.add.at(dropped, starts, 1)
    np.add.at(dropped, first, -1)
    kept = np.cumsum(dropped[:-1]) == 0
    where = np.cumsum(kept) - kept  # each byte's place among the kept bytes
    marks = np.repeat(where[first], 2)
    values = np.empty(2 * len(first), np.uint8)
    values[0::2] = 0
    values[1::2] = 0x80 + sizes
    out = np.insert(a[kept], marks, values)
    return out.tobytes().split(b"\n")
