"""Read a (gzipped) tar archive into memory: the members of a gather archive, nothing on disk.

Parses ustar headers with pax (`x`/`g`) and GNU long-name records, which covers what Python's
tarfile and GNU tar write. tarfile itself costs ~10x more per member and needs a directory to
extract into; a gather archive is a few hundred small members, read once.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass

MAX_ARCHIVE = 256 << 20  # uncompressed; a gather archive is well under 1 MiB
_BLOCK = 512
_ZERO = bytes(_BLOCK)

REGULAR, LINK, DIRECTORY, HARDLINK, OTHER = "file", "symlink", "dir", "hardlink", "other"
_TYPES = {b"0": REGULAR, b"\0": REGULAR, b"7": REGULAR, b"1": HARDLINK, b"2": LINK, b"5": DIRECTORY}


class ArchiveError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Member:
    name: str
    kind: str  # REGULAR, LINK, DIRECTORY, HARDLINK or OTHER
    data: bytes = b""
    linkname: str = ""


def decompress(blob: bytes) -> bytes:
    """gzip, bzip2 and xz archives (by magic number), or a plain tar."""
    if blob[:2] == b"\x1f\x8b":
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out = inflater.decompress(blob, MAX_ARCHIVE)
        except zlib.error as err:
            raise ArchiveError(f"corrupt gzip data ({err})") from None
        if inflater.unconsumed_tail:
            raise ArchiveError(f"larger than {MAX_ARCHIVE >> 20} MiB uncompressed")
        if not inflater.eof:
            raise ArchiveError("truncated gzip data")
        return out
    if blob[:3] == b"BZh" or blob[:6] == b"\xfd7zXZ\x00":
        import bz2
        import lzma

        try:
            return (bz2.decompress if blob[:3] == b"BZh" else lzma.decompress)(blob)
        except (OSError, ValueError, EOFError, lzma.LZMAError) as err:
            raise ArchiveError(f"corrupt compressed data ({err})") from None
    return blob


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.split(b"\0", 1)[0].decode("utf-8")
    except UnicodeDecodeError:
        raise ArchiveError(f"{what} is not UTF-8: {raw[:60]!r}") from None


def _number(field: bytes, what: str) -> int:
    if field[:1] in (b"\x80", b"\xff"):  # GNU base-256
        value = int.from_bytes(field[1:], "big")
        return -value if field[:1] == b"\xff" else value
    text = field.rstrip(b" \0").strip()
    try:
        return int(text, 8) if text else 0
    except ValueError:
        raise ArchiveError(f"bad {what} field {field!r}") from None


def _pax(data: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        space = data.find(b" ", pos)
        if space < 0:
            raise ArchiveError("bad pax header")
        try:
            length = int(data[pos:space])
        except ValueError:
            raise ArchiveError("bad pax header length") from None
        if length <= 0 or pos + length > len(data):
            raise ArchiveError("bad pax header length")
        key, _, value = data[space + 1 : pos + length - 1].partition(b"=")
        out[_text(key, "pax key")] = _text(value, "pax value")
        pos += length
    return out


def members(tar: bytes) -> Iterator[Member]:
    if len(tar) < _BLOCK or (tar[257:262] != b"ustar" and tar[:_BLOCK] != _ZERO):
        # Every ustar, pax and GNU header carries the magic; without it this is no tar at all.
        raise ArchiveError("not a tar archive (plain, gzip, bzip2 or xz)")
    pos = 0
    pax: dict[str, str] = {}
    glob: dict[str, str] = {}
    long_name = long_link = ""
    while True:
        header = tar[pos : pos + _BLOCK]
        if len(header) < _BLOCK:
            raise ArchiveError("truncated tar data (no end-of-archive marker)")
        if header == _ZERO:
            return
        stored = _number(header[148:156], "checksum")
        if stored != sum(header[:148]) + 256 + sum(header[156:]):
            raise ArchiveError(f"bad tar header checksum at offset {pos}")
        size = _number(header[124:136], "size")
        if size < 0:
            raise ArchiveError(f"negative member size at offset {pos}")
        start = pos + _BLOCK
        data = tar[start : start + size]
        if len(data) < size:
            raise ArchiveError("truncated tar data")
        pos = start + (size + _BLOCK - 1) // _BLOCK * _BLOCK
        typeflag = header[156:157]
        if typeflag == b"x":
            pax = _pax(data)
            continue
        if typeflag == b"g":
            glob.update(_pax(data))
            continue
        if typeflag in (b"L", b"K"):
            text = _text(data, "GNU long name")
            long_name, long_link = (text, long_link) if typeflag == b"L" else (long_name, text)
            continue
        name = _text(header[0:100], "member name")
        if header[257:262] == b"ustar" and header[345:346] != b"\0":
            name = f"{_text(header[345:500], 'member prefix')}/{name}"
        linkname = _text(header[157:257], "link name")
        fields = {**glob, **pax}
        name = fields.get("path") or long_name or name
        linkname = fields.get("linkpath") or long_link or linkname
        pax, long_name, long_link = {}, "", ""
        kind = _TYPES.get(typeflag, OTHER)
        yield Member(name=name, kind=kind, data=data if kind == REGULAR else b"", linkname=linkname)
