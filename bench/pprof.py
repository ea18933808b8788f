"""Read a Go CPU profile (what /debug/pprof/profile answers) without a Go toolchain.

The format is pprof's profile.proto, gzip-compressed (github.com/google/pprof, proto/profile.proto):
a Profile holds samples (location ids, values), locations (lines, each a function id), functions
(a name's index in the string table) and the string table. Only what a "top" needs is read:
each sample's CPU nanoseconds, charged to its leaf function (flat) and once to every distinct
function on its stack (cumulative).
"""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        b = buf[i]
        i += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, i
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of one message: an int for varints, bytes for length-delimited."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(buf, i)
            yield num, v
        elif wire == 2:
            n, i = _varint(buf, i)
            yield num, buf[i : i + n]
            i += n
        elif wire == 1:
            yield num, int.from_bytes(buf[i : i + 8], "little")
            i += 8
        elif wire == 5:
            yield num, int.from_bytes(buf[i : i + 4], "little")
            i += 4
        else:
            raise ValueError(f"profile: wire type {wire} not read")


def _ints(v: int | bytes) -> list[int]:
    """A repeated integer field: packed (bytes) or one value."""
    if isinstance(v, int):
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = _varint(v, i)
        out.append(x)
    return out


# What a request's CPU is spent on, by a piece of the function names on its stack; a sample counts
# for every part its stack shows (so the shares overlap: a webhook call encodes JSON too).
PARTS = {
    "create": "handlers.CreateResource",
    "patch": "handlers.PatchResource",
    "update (PUT)": "handlers.UpdateResource",
    "delete": "handlers.DeleteResource",
    "list/get": "handlers.ListResource|handlers.GetResource",
    "watch (serve)": "handlers.serveWatch|WatchServer",
    "watch cache": "storage/cacher.",
    "mutating webhook": "admission/plugin/webhook/mutating",
    "admission policy (CEL)": "plugin/policy/|/cel",
    "authentication": "authentication",
    "authorization": "Authorize",  # the authorizers (RBAC, Node); the filter wraps whole requests
    "etcd storage": "storage/etcd3",
    "JSON": "encoding/json|serializer/json|sigs.k8s.io/json|json-iterator|structured-merge-diff",
    "protobuf": "protobuf|).Marshal|).Unmarshal",  # generated methods; not encoding/json.Marshal
    "TLS": "crypto/",
    "garbage collection": "runtime.gcBgMarkWorker|runtime.gcAssist|runtime.mallocgc",
    "managed fields": "fieldmanager",
}


@dataclass(frozen=True)
class Top:
    total: int  # nanoseconds of CPU in the profile
    flat: Counter[str]
    cumulative: Counter[str]
    parts: Counter[str]


def read(data: bytes) -> Top:
    """The profile's CPU time by function. `data`: the gzip-compressed profile."""
    raw = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    strings: list[bytes] = []
    samples: list[tuple[list[int], list[int]]] = []
    loc_funcs: dict[int, list[int]] = {}
    func_name: dict[int, int] = {}
    value_index = 1  # [samples, cpu nanoseconds] in a CPU profile
    for num, v in _fields(raw):
        if num == 6 and isinstance(v, bytes):
            strings.append(v)
        elif num == 2 and isinstance(v, bytes):
            locs: list[int] = []
            vals: list[int] = []
            for n, x in _fields(v):
                if n == 1:
                    locs += _ints(x)
                elif n == 2:
                    vals += _ints(x)
            samples.append((locs, vals))
        elif num == 4 and isinstance(v, bytes):
            lid, funcs = 0, []
            for n, x in _fields(v):
                if n == 1 and isinstance(x, int):
                    lid = x
                elif n == 4 and isinstance(x, bytes):
                    funcs += [int(f) for m, f in _fields(x) if m == 1 and isinstance(f, int)]
            loc_funcs[lid] = funcs
        elif num == 5 and isinstance(v, bytes):
            fid = name = 0
            for n, x in _fields(v):
                if n == 1 and isinstance(x, int):
                    fid = x
                elif n == 2 and isinstance(x, int):
                    name = x
            func_name[fid] = name
    flat: Counter[str] = Counter()
    cumulative: Counter[str] = Counter()
    parts: Counter[str] = Counter()
    total = 0
    pieces = {part: words.split("|") for part, words in PARTS.items()}

    def name_of(fid: int) -> str:
        return strings[func_name.get(fid, 0)].decode(errors="replace")

    for locs, vals in samples:
        value = vals[value_index] if len(vals) > value_index else (vals[0] if vals else 0)
        total += value
        stack = [name_of(f) for lid in locs for f in loc_funcs.get(lid, [])]
        if stack:
            flat[stack[0]] += value  # the first location is the leaf (innermost inline first)
        for fn in set(stack):
            cumulative[fn] += value
        for part, words in pieces.items():
            if any(w in fn for fn in stack for w in words):
                parts[part] += value
    return Top(total, flat, cumulative, parts)


def by_part(top: Top) -> str:
    """CPU seconds by what it was spent on (PARTS; overlapping)."""
    return ", ".join(f"{p} {top.parts.get(p, 0) / 1e9:.2f}" for p in PARTS)


def table(top: Top, rows: int = 25, match: str = "") -> str:
    """The functions taking most CPU (cumulative), with their share of the profile."""
    lines = [f"  {'cum %':>6} {'flat %':>6}  function  (CPU {top.total / 1e9:.2f} s in profile)"]
    picked = [(n, c) for n, c in top.cumulative.most_common() if match in n][:rows]
    for name, cum in picked:
        share = 100 * cum / max(top.total, 1)
        flat = 100 * top.flat.get(name, 0) / max(top.total, 1)
        lines.append(f"  {share:6.1f} {flat:6.1f}  {name[:140]}")
    return "\n".join(lines)
