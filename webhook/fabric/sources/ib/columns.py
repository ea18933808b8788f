"""Read ibnetdiscover's own topology-file layout a window of lines at a time, with NumPy.

The line parser (reader.py) spends about a microsecond of Python on every line: seconds on the
4 million lines of a 65,536-node dump. ibnetdiscover prints one exact layout (rdma-core
infiniband-diags/ibnetdiscover.c: `out_switch`, `out_ca`, `out_switch_port`, `out_ca_port`), so
here its lines are found, sorted into kinds and cut into fields by whole-array operations, and
the cable checks (cables.py) are sorts. A window that holds anything else (spaces for tabs,
upper-case or short GUIDs, `-g` grouping, tool messages, a line cut short) makes `scan` return
None and the line parser reads the dump again: it accepts exactly the same dumps, and it names
the line of a problem. This module never reports an error; it only declines.

Fields are read as 8-byte words (one gather reads up to 8 characters; a bit trick finds a
`]`, `)` or space among them), from the line's start along the layout, and every byte up to the
comment is checked, so no field is ever read from the next line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from webhook.fabric.sources.ib.cables import Blocks, Cables, assemble
from webhook.fabric.sources.ib.dump import Dump
from webhook.fabric.sources.ib.packedtexts import Words
from webhook.fabric.sources.textchunks import Chunks

I64 = NDArray[np.int64]
U8 = NDArray[np.uint8]
U64 = NDArray[np.uint64]
Bools = NDArray[np.bool_]
_WINDOW = 4 << 20  # characters read into one window (ends at a blank line: whole blocks only)
_PAD = 64  # zero bytes after a window: a field read just past its last line stays inside
_KEYS = (b"vendid=", b"devid=", b"sysimgguid=", b"switchguid=", b"caguid=", b"rtguid=")
_HEADS = ((b"Switch\t", ord("S")), (b"Ca\t", ord("H")), (b"Rt\t", ord("R")))
_GENERATED = re.compile(r"generated (?:\S+ )*?on (.+)$")  # as reader.py reads it
_QUOTE, _NL = ord('"'), ord("\n")
_ONES, _HIGH, _LOW4 = (
    np.uint64(0x0101010101010101),
    np.uint64(0x8080808080808080),
    np.uint64(0x0F0F0F0F0F0F0F0F),
)
_ZEROS, _ALL = _ONES * np.uint64(0x30), np.uint64(0xFFFFFFFFFFFFFFFF)  # "00000000"; every bit
_BYTE_INDEX = np.uint64(0x0001020304050607)
_M8, _M16, _M32 = np.uint64(0x000F000F000F000F), np.uint64(0x000000FF000000FF), np.uint64(0xFFFF)


class _Declined(Exception):
    """Something outside the exact layout: the line parser reads the dump."""


def scan(src: Chunks) -> Dump | None:
    """The dump, or None when any of it is not in ibnetdiscover's exact layout."""
    blocks, cables = Blocks(_guid_values), Cables(_guid_values)
    generated = ""
    try:
        for window, size in _windows(src):
            got = _window(window, size, blocks, cables)
            generated = generated or got
    except _Declined:
        return None
    return assemble(blocks, cables, generated)


def _windows(src: Chunks) -> Iterator[tuple[bytes, int]]:
    """Windows of whole blocks, each ending just before a blank line, ASCII only (the line
    parser strips Unicode spaces that the byte layout cannot see): (bytes, size), the bytes
    running _PAD past the window into the next one (or zeros), so that a field read just past
    the window's last line stays inside without a copy to pad it."""
    held: list[str] = []
    size = 0
    for chunk in src():
        held.append(chunk)
        size += len(chunk)
        if size < _WINDOW + _PAD:
            continue
        text = held[0] if len(held) == 1 else "".join(held)
        cut = text.rfind("\n\n", 0, len(text) - _PAD)
        if cut >= 0:  # the whole text read; the window is its first cut + 1 characters
            yield _encoded(text), cut + 1
            text = text[cut + 1 :]
        held, size = [text], len(text)
    text = "".join(held)
    if text:
        text = text if text.endswith("\n") else text + "\n"
        yield _encoded(text + "\0" * _PAD), len(text)


def _encoded(text: str) -> bytes:
    if not text.isascii():
        raise _Declined
    return text.encode("ascii")


def _window(data: bytes, size: int, blocks: Blocks, cables: Cables) -> str:
    """Add one window's blocks and cables (its first `size` bytes); return its `# ...
    generated on` date ("" if none)."""
    a = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(a[:size] == _NL)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    first = a[starts]
    w = _words(a)
    is_port = first == ord("[")
    known = is_port | (first == _NL) | (first == ord("#"))
    kind = np.zeros(len(ends), np.uint8)
    for prefix, letter in _HEADS:
        rows = np.flatnonzero(first == prefix[0])
        kind[rows[_equal(w, starts[rows], prefix)]] = letter
    for key in _KEYS:
        rows = np.flatnonzero(first == key[0])
        known[rows[_equal(w, starts[rows], key)]] = True
    is_head = kind != 0
    _require((known | is_head).all())
    # A port line belongs to the header right above its run of port lines: the line before
    # each run is a header, and no header lies inside a run.
    _require(not is_port[0])
    ports = np.flatnonzero(is_port)
    runs = ports[~is_port[ports - 1]]
    _require(is_head[runs - 1].all())
    heads = np.flatnonzero(is_head)
    base = blocks.count
    _headers(data, a, w, starts[heads], ends[heads], kind[heads], blocks)
    owner = base + np.cumsum(is_head)[ports] - 1
    _ports(a, w, starts[ports], owner, blocks, cables)
    return _generated(data, starts, ends, np.flatnonzero(first == ord("#")))


def _headers(data: bytes, a: U8, w: U64, s: I64, e: I64, kind: U8, blocks: Blocks) -> None:
    """`Switch\t<n> "S-<16 hex>"\t\t# "<desc>"<rest>` (Ca and H-, Rt and R- alike); the
    description runs to the line's last quote, as reader.py's greedy pattern reads it.

    Every byte from the line's start to the description is checked, so no field is read from
    another line."""
    digits = s + np.where(kind == ord("S"), 7, 3)
    space = _find(w, digits, ord(" "))
    nports = _number(a, digits, space, 4)
    q = space + 1  # the id's opening quote
    _require(
        (a[q] == _QUOTE).all()
        and (a[q + 1] == kind).all()
        and _equal(w, q + 2, b"-").all()
        and _equal(w, q + 19, b'"\t\t# "').all()
    )
    text = (w[q + 3], w[q + 11])
    # A CA's line ends with its description's closing quote; a switch's goes on (`enhanced
    # port 0 lid ...`): its few last quotes are found one line at a time.
    last = e - 1
    for row in np.flatnonzero(a[last] != _QUOTE).tolist():
        last[row] = data.rfind(b'"', int(q[row]) + 25, int(e[row]))
    _require((last >= q + 25).all())
    blocks.add(kind, text, nports, _packed(a, q + 25, last), last - (q + 25))


def _ports(a: U8, w: U64, s: I64, owner: I64, blocks: Blocks, cables: Cables) -> None:
    """`[<p>]`, `(<own port GUID>) ` on a CA or router, `\t"<id>"[<q>]`, then when the far end
    is not a switch `(<its port GUID>) ` (a switch's line; a CA's line has ` (...) `, declined
    here), then `\t\t#` and a comment. Every byte up to the `#` is checked, so no field is read
    from another line."""
    close = _find(w, s + 1, ord("]"))
    port = _number(a, s + 1, close, 6)
    own = np.flatnonzero(a[close + 1] == ord("("))
    q = close + 2  # the far end's id: `]\t"`, or after the own port GUID: `](...) \t"`
    own_end = _find(w, close[own] + 2, ord(")"), 3)
    q[own] = own_end + 3
    _require(_equal(w, own_end, b") ").all())
    _require(
        _equal(w, q - 1, b'\t"').all()
        and _equal(w, q + 2, b"-").all()
        and _equal(w, q + 19, b'"[').all()
    )
    far_kind = a[q + 1]
    _require(((far_kind == ord("S")) | (far_kind == ord("H")) | (far_kind == ord("R"))).all())
    far = (w[q + 3], w[q + 11])  # checked when looked up: it must spell a block's GUID
    far_close = _find(w, q + 21, ord("]"))
    far_port = _number(a, q + 21, far_close, 6)
    paren = np.flatnonzero(a[far_close + 1] == ord("("))
    comment = far_close + 1  # `\t\t#`, or after the far end's port GUID: `](...) \t\t#`
    paren_end = _find(w, far_close[paren] + 2, ord(")"), 3)
    comment[paren] = paren_end + 2
    _require(_equal(w, paren_end, b") ").all() and _equal(w, comment, b"\t\t#").all())
    cables.add(owner, port, far_kind, far, far_port)
    if len(own):
        blocks.add_port_guids(owner[own], _padded(w, close[own] + 2, own_end))
    if len(paren):
        far_end = (far[0][paren], far[1][paren])
        cables.add_far_port_guids(paren, far_end, _padded(w, far_close[paren] + 2, paren_end))


def _generated(data: bytes, starts: I64, ends: I64, rows: I64) -> str:
    for row in rows.tolist():
        line = data[starts[row] : ends[row]].decode().strip()
        m = _GENERATED.search(line)
        if m:
            return m.group(1).strip()
    return ""


def _require(ok: bool | np.bool_) -> None:
    if not ok:
        raise _Declined


def _words(a: U8) -> U64:
    """A view in which element i is the 8 bytes a[i:i+8] (little-endian): one gather reads a
    field of up to 8 bytes."""
    return np.ndarray((len(a) - 7,), np.dtype("<u8"), a, 0, (1,))


def _equal(w: U64, at: I64, text: bytes) -> Bools:
    """Whether the bytes at each of `at` spell `text`."""
    ok = np.ones(len(at), np.bool_)
    for i in range(0, len(text), 8):
        part = text[i : i + 8]
        mask = np.uint64((1 << (8 * len(part))) - 1)
        ok &= (w[at + i] & mask) == np.uint64(int.from_bytes(part, "little"))
    return ok


def _find(w: U64, start: I64, char: int, words: int = 1) -> I64:
    """The first `char` in the 8 * `words` bytes from each start. A bit trick on each 8-byte
    word: a byte equal to `char` becomes zero, and the lowest zero byte raises the lowest high
    bit (a carry may raise bits above it, never below); its byte's index is the top byte of
    that bit times 0x0001020304050607."""
    found = np.full(len(start), -1, np.int64)
    for i in range(words):
        x = w[start + 8 * i] ^ (_ONES * np.uint64(char))
        zero = (x - _ONES) & ~x & _HIGH
        hit = (zero != 0) & (found < 0)
        lowest = zero[hit] & (~zero[hit] + np.uint64(1))
        byte = ((lowest >> np.uint64(7)) * _BYTE_INDEX) >> np.uint64(56)
        found[hit] = start[hit] + 8 * i + byte.astype(np.int64)
    _require(not (found < 0).any())
    return found


def _number(a: U8, lo: I64, hi: I64, width: int) -> I64:
    """The decimal number in a[lo:hi] (1 to `width` digits)."""
    size = hi - lo
    _require(((size >= 1) & (size <= width)).all())
    value = np.zeros(len(lo), np.int64)
    for i in range(int(size.max(initial=0))):
        inside = size > i
        digit = a[lo + i] - np.uint8(48)  # wraps below '0': anything but a digit is > 9
        _require(not (inside & (digit > 9)).any())
        value = np.where(inside, value * 10 + digit, value)
    return value


def _guid_values(text: Words) -> U64:
    """GUIDs as printed (two 8-character words each) -> their values; declines a character
    that is not a lower-case hex digit."""
    return _hex_word(text[0]) << np.uint64(32) | _hex_word(text[1])


def _padded(w: U64, lo: I64, hi: I64) -> Words:
    """The GUID in [lo, hi), 1 to 16 characters (port GUIDs are printed without zero padding),
    padded with '0' to the 16 characters a node GUID is printed with."""
    size = hi - lo
    _require(((size >= 1) & (size <= 16)).all())
    if (size == 16).all():  # no leading zero to put back (mlx5 GUIDs mostly): as printed
        return w[lo], w[lo + 8]
    pad = 16 - size  # leading characters that are not the GUID's: read as '0'
    words = []
    for word, before in ((w[hi - 16], pad), (w[hi - 8], pad - 8)):
        bits = (np.clip(before, 0, 8) * 8).astype(np.uint64)
        mask = np.where(bits == 64, _ALL, (np.uint64(1) << (bits % np.uint64(64))) - np.uint64(1))
        words.append((word & ~mask) | (_ZEROS & mask))
    return words[0], words[1]


def _hex_word(v: U64) -> U64:
    """Eight hex characters ('0'-'9', 'a'-'f': the dump's spelling) read as one 8-byte word,
    first character lowest -> their 32-bit value. Byte-wise range tests: adding 0x80 - lo to an
    ASCII byte sets its high bit iff the byte >= lo, without a carry into the next byte."""

    def at_least(lo: int) -> U64:
        return v + _ONES * np.uint64(0x80 - lo)

    digit = at_least(0x30) & ~at_least(0x3A)
    letter = at_least(0x61) & ~at_least(0x67)
    _require(((digit | letter) & _HIGH == _HIGH).all())
    nibble = (v & _LOW4) + ((v >> np.uint64(6)) & _ONES) * np.uint64(9)
    # Adjacent nibbles -> bytes, bytes -> 16-bit pairs, pairs -> 32 bits, first character first.
    x = ((nibble & _M8) << np.uint64(4)) | ((nibble >> np.uint64(8)) & _M8)
    x = ((x & _M16) << np.uint64(8)) | ((x >> np.uint64(16)) & _M16)
    return ((x & _M32) << np.uint64(16)) | ((x >> np.uint64(32)) & _M32)


def _packed(a: U8, lo: I64, hi: I64) -> bytes:
    """a[lo[i]:hi[i]] for every i, each followed by a newline, in one buffer (one gather; a
    span lies inside one line, so it holds no newline)."""
    size = hi - lo
    width = size + 1
    out_start = np.cumsum(width) - width
    out = a[np.arange(int(width.sum())) + np.repeat(lo - out_start, width)]
    out[out_start + size] = _NL
    packed: bytes = out.tobytes()
    return packed
