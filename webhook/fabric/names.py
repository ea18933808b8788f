"""Names: valid label values, Slurm hostlist expressions (natural sort: common/natural.py)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)$")
_BAD_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def label_value(raw: str) -> str:
    """`raw` itself when it is a valid label value; otherwise a readable prefix plus a hash of raw.

    The hash is over the raw name, so two names that differ only in characters a label cannot
    hold still get different values.
    """
    if _LABEL_VALUE.match(raw):
        return raw
    digest = hashlib.sha256(raw.encode()).hexdigest()[:10]
    prefix = _BAD_CHARS.sub("-", raw)[:52].strip("-._")
    return f"{prefix}-{digest}" if prefix else f"x{digest}"


def is_label_value(value: str) -> bool:
    return bool(_LABEL_VALUE.match(value))


def _split_top(expr: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in hostlist {expr!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError(f"unbalanced '[' in hostlist {expr!r}")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _expand_range(spec: str, expr: str) -> list[str]:
    out: list[str] = []
    for item in spec.split(","):
        item = item.strip()
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"bad range {item!r} in hostlist {expr!r}")
        start, end = int(lo), int(hi) if sep else int(lo)
        if end < start or end - start > 100_000:
            raise ValueError(f"bad range {item!r} in hostlist {expr!r}")
        width = len(lo) if lo.startswith("0") else 0
        out += [str(i).zfill(width) for i in range(start, end + 1)]
    return out


def _expand_one(word: str) -> list[str]:
    m = re.search(r"\[([^\[\]]*)\]", word)
    if not m:
        if "[" in word or "]" in word:
            raise ValueError(f"unbalanced brackets in hostlist {word!r}")
        return [word]
    head, tail = word[: m.start()], word[m.end() :]
    return [head + n + t for n in _expand_range(m.group(1), word) for t in _expand_one(tail)]


def expand_hostlist(expr: str) -> list[str]:
    """Slurm hostlist expression (`tux[0-3,12],gpu7`) -> names in order; ValueError if malformed."""
    return [name for word in _split_top(expr) for name in _expand_one(word)]


_SUFFIX = re.compile(r"^(.*?)(\d{1,9})$")  # at most 9 digits make the number, the rest prefix
_RUN_MAX = 100_000  # expand_hostlist refuses longer ranges


def compress_hostlist(names: Iterable[str]) -> str:
    """Names -> a Slurm hostlist expression that expands back to exactly them, in order.

    Runs of consecutive numeric suffixes become ranges (`gpu[001-008]`), with Slurm's width rule:
    a range expands to each number zero-padded to its first number's width, so `n[08-10]` and
    `n[9-10]` hold, and `n1`, `n01` never merge. Adjacent runs with one prefix share a bracket.
    """
    runs: list[tuple[str, str, int]] = []  # prefix, first digits, count
    for name in names:
        m = _SUFFIX.match(name)
        if not m or "[" in name or "," in name:
            runs.append((name, "", 0))
            continue
        prefix, digits = m.group(1), m.group(2)
        if runs:
            p, first, count = runs[-1]
            nxt = int(first) + count if count else -1
            if count and p == prefix and count < _RUN_MAX and str(nxt).zfill(len(first)) == digits:
                runs[-1] = (p, first, count + 1)
                continue
        runs.append((prefix, digits, 1))
    words: list[tuple[str, list[str]]] = []
    for prefix, first, count in runs:
        if not count:
            words.append((prefix, []))
            continue
        last = str(int(first) + count - 1).zfill(len(first))
        item = first if count == 1 else f"{first}-{last}"
        if words and words[-1][0] == prefix and words[-1][1]:
            words[-1][1].append(item)
        else:
            words.append((prefix, [item]))
    out = []
    for prefix, items in words:
        if not items:
            out.append(prefix)
        elif len(items) == 1 and "-" not in items[0]:
            out.append(prefix + items[0])
        else:
            out.append(f"{prefix}[{','.join(items)}]")
    return ",".join(out)
