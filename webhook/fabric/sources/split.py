"""A topology source cut into ConfigMap parts that each stay under the API's 1 MiB: one ConfigMap
with the text in `data` when it fits, else gzip in `binaryData` over as many parts as needed,
each part ending its own gzip member (see parts.py for how they are read back).
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from webhook.fabric.sources.parts import COUNT_ANNOTATION, PART_LABEL, SHA256_ANNOTATION, part_name

# Bytes of one part's value as the API stores it (JSON text of `data`, base64 of `binaryData`):
# the API refuses a ConfigMap over 1 MiB, and name, labels and annotations need a little room.
VALUE_BUDGET = 900 * 1024
_FINISH = 64  # what ending a member adds after a sync flush: an empty final block and the trailer
_SLACK = 1024  # a block that compresses worse than stored bytes still fits in this much more


@dataclass(frozen=True)
class Split:
    entry: str  # `<key>` (text in data) or `<key>.gz` (gzip in binaryData)
    values: tuple[bytes, ...]  # per part: the text's bytes, or its gzip member
    sha256: str  # of the whole content


def split(blocks: Iterable[bytes], key: str, budget: int = VALUE_BUDGET) -> Split:
    """Cut the content (given in blocks of up to ~64 KiB) into parts. Holds the compressed parts
    and at most one part's worth of text, never the whole text."""
    digest = hashlib.sha256()
    head: list[bytes] = []
    size = 0
    it = _pieces(blocks, min(64 * 1024, max(budget // 8, 64)))
    for block in it:
        digest.update(block)
        head.append(block)
        size += len(block)
        if size > budget:
            break
    else:
        whole = b"".join(head)
        if len(json.dumps(whole.decode("utf-8", "replace"))) <= budget:
            return Split(key, (whole,), digest.hexdigest())
    packer = _Packer(budget // 4 * 3)
    for block in head:
        packer.add(block)
    for block in it:
        digest.update(block)
        packer.add(block)
    return Split(f"{key}.gz", packer.finish(), digest.hexdigest())


def _pieces(blocks: Iterable[bytes], most: int) -> Iterator[bytes]:
    """The blocks cut to at most `most` bytes (the packer's fit test assumes small blocks)."""
    for block in blocks:
        for at in range(0, len(block), most):
            yield block[at : at + most]


class _Packer:
    """gzip members of at most `limit` bytes each, filled as far as blocks allow."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self._out: list[bytes] = []
        self._size = 0
        self._z = zlib.compressobj(6, zlib.DEFLATED, 31)

    def add(self, block: bytes) -> None:
        z = self._z
        if self._size + len(block) + _SLACK + _FINISH > self.limit:
            # It may not fit: compress on a copy, and start a new part when it does not.
            z = self._z.copy()
            out = z.compress(block) + z.flush(zlib.Z_SYNC_FLUSH)
            if self._size + len(out) + _FINISH > self.limit and self._size:
                self._end()
                z = self._z
                out = z.compress(block) + z.flush(zlib.Z_SYNC_FLUSH)
        else:
            out = z.compress(block) + z.flush(zlib.Z_SYNC_FLUSH)
        self._z = z
        self._out.append(out)
        self._size += len(out)

    def _end(self) -> None:
        self._out.append(self._z.flush(zlib.Z_FINISH))
        self.parts.append(b"".join(self._out))
        self._out, self._size = [], 0
        self._z = zlib.compressobj(6, zlib.DEFLATED, 31)

    def finish(self) -> tuple[bytes, ...]:
        if self._size or not self.parts:
            self._end()
        return tuple(self.parts)


def configmaps(s: Split, namespace: str) -> Iterator[dict[str, Any]]:
    """The parts as ConfigMap objects, part 0 first (one at a time: each holds its own base64)."""
    gz = s.entry.endswith(".gz")
    for i, value in enumerate(s.values):
        meta = {
            "name": part_name(i),
            "namespace": namespace,
            "labels": {PART_LABEL: str(i)},
            "annotations": {COUNT_ANNOTATION: str(len(s.values)), SHA256_ANNOTATION: s.sha256},
        }
        body = (
            {"binaryData": {s.entry: base64.b64encode(value).decode("ascii")}}
            if gz
            else {"data": {s.entry: value.decode("utf-8")}}
        )
        yield {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, **body}
