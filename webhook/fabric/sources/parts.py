"""A topology source held in ConfigMaps (DESIGN "Network position"): which ConfigMaps are its parts,
their order, and their content as one stream of bytes.

The parts: ConfigMap `gpufabric-topology` (part 0 unless it carries the label) and every ConfigMap
labelled `gpufabric.io/topology-part=<index>`. Each holds the same one of the keys, as text in
`data` or gzip-compressed in `binaryData` as `<key>.gz`. The content is the parts' text joined in
index order; for `.gz` the parts' bytes joined in index order are one gzip file (one or more
members), so a member may run on into the next part (a file cut with `split -b`). `topology -o
configmaps` ends a member in every part, so each of its parts also decompresses alone and a part
cut short is named exactly. Two annotations, written by `-o configmaps`, optional when parts are
made by hand: `gpufabric.io/topology-parts` (how many parts; parts past it are leftovers of a
longer source and are ignored) and `gpufabric.io/topology-sha256` (of the whole content: parts
that differ come from two sources, e.g. an update half applied, and are not read together).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import hashlib
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.fabric.model import SourceError
from webhook.fabric.sources.formats import KEYS

CONFIGMAP = "gpufabric-topology"
PART_LABEL = "gpufabric.io/topology-part"
COUNT_ANNOTATION = "gpufabric.io/topology-parts"
SHA256_ANNOTATION = "gpufabric.io/topology-sha256"
# Decompressed content larger than this is refused (a gzip bomb would fill the pod's memory):
# 65,536 8-rail nodes print ~222 MB.
MAX_CONTENT = 1 << 30
_CHUNK = 1 << 20  # bytes of output per decompress call
_INDEX = re.compile(r"0|[1-9][0-9]{0,5}")
_GZIP_MAGIC = b"\x1f\x8b\x08"


class PartError(SourceError):
    """A part is missing, duplicated, cut short or damaged; the message names the part."""


def part_name(index: int) -> str:
    """The ConfigMap name `-o configmaps` gives part `index`."""
    return CONFIGMAP if index == 0 else f"{CONFIGMAP}-{index}"


@dataclass(frozen=True)
class Part:
    name: str  # the ConfigMap's name
    label: str | None  # its gpufabric.io/topology-part; None: gpufabric-topology unlabelled
    entries: tuple[tuple[str, str], ...]  # (entry, value): `<key>` text or `<key>.gz` base64
    count: str | None = None  # gpufabric.io/topology-parts
    sha256: str | None = None  # gpufabric.io/topology-sha256

    @property
    def index(self) -> int | None:
        """0, 1, ...; None when the label is not an index."""
        if self.label is None:
            return 0
        return int(self.label) if _INDEX.fullmatch(self.label) else None

    @property
    def where(self) -> str:
        return f"part {self.index} (ConfigMap {self.name})"

    def topology_keys(self) -> set[str]:
        return {entry.removesuffix(".gz") for entry, _ in self.entries}


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def part_of(obj: Mapping[str, Any]) -> Part | None:
    """The part a ConfigMap object (as the API returns it) is; None when it is not one."""
    meta = obj.get("metadata") or {}
    name = name_of(obj)
    labels = meta.get("labels") or {}
    label = labels.get(PART_LABEL) if isinstance(labels, Mapping) else None
    if label is None and name != CONFIGMAP:
        return None
    notes = meta.get("annotations") or {}
    notes = notes if isinstance(notes, Mapping) else {}
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    entries = [(k, v) for k in KEYS if isinstance(v := data.get(k), str) and v.strip()]
    entries += [(f"{k}.gz", v) for k in KEYS if isinstance(v := binary.get(f"{k}.gz"), str) and v]
    count, sha = notes.get(COUNT_ANNOTATION), notes.get(SHA256_ANNOTATION)
    return Part(
        name,
        None if label is None else str(label),
        tuple(entries),
        None if count is None else str(count),
        None if sha is None else str(sha),
    )


@dataclass(frozen=True)
class Source:
    """The parts of one source, checked and in index order."""

    key: str  # one of KEYS
    entry: str  # the key, or `<key>.gz`
    parts: tuple[Part, ...]

    @property
    def where(self) -> str:
        """The ConfigMaps and key, for messages about the content."""
        if len(self.parts) == 1:
            return f"ConfigMap {self.parts[0].name} key {self.entry}"
        return f"ConfigMaps {self.parts[0].name}..{self.parts[-1].name} key {self.entry}"


def assemble(found: Iterable[Part]) -> Source | None:
    """The source the parts make; None when there is none (no part, or only an unlabelled
    `gpufabric-topology` without a topology key). PartError names the part that is wrong."""
    parts = list(found)
    if not parts or (len(parts) == 1 and parts[0].label is None and not parts[0].entries):
        return None
    by_index: dict[int, Part] = {}
    for p in sorted(parts, key=lambda p: p.name):
        i = p.index
        if i is None:
            raise PartError(
                f"ConfigMap {p.name}: label {PART_LABEL}={p.label} is not a part index (0, 1, ...)"
            )
        if i in by_index:
            raise PartError(f"part {i} is given twice: ConfigMaps {by_index[i].name} and {p.name}")
        by_index[i] = p
    first = by_index.get(0)
    if first is None:
        raise PartError(f"part 0 missing (ConfigMap {CONFIGMAP}, or one labelled {PART_LABEL}=0)")
    count = _count(first) if first.count is not None else max(by_index) + 1
    ordered: list[Part] = []
    for i in range(count):
        at = by_index.get(i)
        if at is None:
            of = f" of {count}" if first.count is not None else ""
            raise PartError(
                f"part {i}{of} missing: no ConfigMap labelled {PART_LABEL}={i} ({part_name(i)})"
            )
        ordered.append(at)
    entry = _entry(first)
    for p in ordered[1:]:
        if _entry(p) != entry:
            raise PartError(f"{p.where} holds {_entry(p)}, part 0 holds {entry}: keep one key")
        if (p.count, p.sha256) != (first.count, first.sha256):
            raise PartError(
                f"{p.where} and {first.where} come from different sources ({COUNT_ANNOTATION} or "
                f"{SHA256_ANNOTATION} differ): an update half applied? apply every part"
            )
    return Source(entry.removesuffix(".gz"), entry, tuple(ordered))


def _count(first: Part) -> int:
    if first.count is None or not _INDEX.fullmatch(first.count) or first.count == "0":
        raise PartError(f"{first.where}: {COUNT_ANNOTATION}={first.count} is not a part count")
    return int(first.count)


def _entry(p: Part) -> str:
    if len(p.entries) != 1:
        found = ", ".join(e for e, _ in p.entries)
        keys = ", ".join(KEYS)
        raise PartError(
            f"{p.where} holds more than one topology key ({found}); keep one"
            if p.entries
            else f"{p.where} holds none of the keys {keys} (data) or <key>.gz (binaryData)"
        )
    return p.entries[0][0]


def digest(source: Source) -> str:
    """sha256 of the parts as stored (compressed, base64): equal digests, equal content, without
    decompressing (~22 MB of parts for 65,536 nodes, ~10x fewer bytes than the text)."""
    h = hashlib.sha256()
    for p in source.parts:
        for entry, value in p.entries:
            h.update(f"{len(entry)}:{entry}{len(value)}:".encode())
            h.update(value.encode())
    return h.hexdigest()


def chunks(source: Source) -> Iterator[bytes]:
    """The content in pieces, as decoded; PartError naming the part cut short or damaged, and
    (when the parts carry it) when the whole does not match its sha256."""
    digest = hashlib.sha256()
    size = 0
    pieces = _gunzip(source.parts) if source.entry.endswith(".gz") else _plain(source.parts)
    for piece in pieces:
        size += len(piece)
        if size > MAX_CONTENT:
            raise PartError(f"{source.where}: more than {MAX_CONTENT >> 20} MiB of content")
        digest.update(piece)
        yield piece
    want = source.parts[0].sha256
    if want is not None and digest.hexdigest() != want:
        raise PartError(
            f"{source.where}: the content does not match {SHA256_ANNOTATION} (a part was "
            f"edited or cut short): apply every part again"
        )


def text(source: Source) -> str:
    """The whole content as text (offline; the labeler streams it with text_chunks)."""
    return "".join(text_chunks(source)())


def text_chunks(source: Source) -> Callable[[], Iterator[str]]:
    """The content as text in pieces that end at line ends, decoded again on each call: the
    parse streams it, and only a problem's line is looked up by a second pass."""

    def pieces() -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")()
        carry, offset = "", 0  # offset: bytes handed to the decoder so far

        def decoded(data: bytes, final: bool = False) -> str:
            held = len(decoder.getstate()[0])  # bytes of a character begun in the last piece
            try:
                return decoder.decode(data, final)
            except UnicodeDecodeError as err:
                at = offset - held + err.start
                raise PartError(f"{source.where}: not UTF-8 text (byte offset {at})") from None

        for piece in chunks(source):
            text = carry + decoded(piece)
            offset += len(piece)
            cut = text.rfind("\n") + 1
            if cut:
                yield text[:cut]
            carry = text[cut:]
        carry += decoded(b"", final=True)
        if carry:
            yield carry

    return pieces


def _plain(parts: tuple[Part, ...]) -> Iterator[bytes]:
    for p in parts:
        yield p.entries[0][1].encode("utf-8")


def _gunzip(parts: tuple[Part, ...]) -> Iterator[bytes]:
    """The gzip members in the parts' bytes, in order; a member may span parts."""
    d: Any = None  # the member being read; None at a boundary between members
    began = 0  # the part the member being read began in
    for i, p in enumerate(parts):
        entry, value = p.entries[0]
        try:
            data = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise PartError(f"{p.where}: {entry} is not base64") from None
        while True:
            if d is None:
                if not data:
                    break
                d, began = zlib.decompressobj(31), i
            try:
                out = d.decompress(data, _CHUNK)
            except zlib.error as err:
                raise PartError(_damaged(parts, i, began, str(err))) from None
            if out:
                yield out
            if d.eof:
                data, d = d.unused_data, None
            elif not (data := d.unconsumed_tail) and len(out) < _CHUNK:
                break  # this part is used up; the member goes on in the next one
    if d is not None:
        raise PartError(f"{parts[-1].where}: gzip data cut short (the stream ends inside a member)")


def _damaged(parts: tuple[Part, ...], i: int, began: int, err: str) -> str:
    p = parts[i]
    if began < i and _starts_member(p):
        # The member began in an earlier part, and this part opens a new one: the part before
        # ends early.
        return f"{parts[i - 1].where}: gzip data cut short (its member does not end in it)"
    since = f"; the member began in {parts[began].where}" if began < i else ""
    return f"{p.where}: damaged gzip data ({err}){since}"


def _starts_member(p: Part) -> bool:
    value = p.entries[0][1]
    return len(value) >= 4 and base64.b64decode(value[:4]).startswith(_GZIP_MAGIC)
