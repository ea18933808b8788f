"""`topology --source` given ConfigMaps (the List `-o configmaps` prints, or `kubectl get configmap
-o yaml`), and `-o configmaps`: the source cut into ConfigMap parts for a cluster."""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import yaml

from common.cli import UsageError
from webhook.cli.documents import documents, read_text
from webhook.fabric.model import SourceError
from webhook.fabric.sources.formats import KEYS, detect
from webhook.fabric.sources.parts import (
    CONFIGMAP,
    PART_LABEL,
    Source,
    assemble,
    chunks,
    part_of,
    text,
)
from webhook.fabric.sources.split import configmaps, split

BLOCK = 64 * 1024
_HEAD = 1 << 20  # enough of a dump to tell its format
# A Kubernetes object file: a line opens with apiVersion or kind (YAML or kubectl's JSON). No
# topology format starts a line so.
_OBJECTS = re.compile(rb'^\s*"?(?:apiVersion|kind)"?\s*:', re.MULTILINE)


def is_objects(path: Path) -> bool:
    if not path.is_file():
        return False  # read_text says what is wrong with it
    with path.open("rb") as f:
        return bool(_OBJECTS.search(f.read(BLOCK)))


def source_of(path: Path) -> Source:
    """The source the file's ConfigMaps hold (any namespace; List items unpacked)."""
    found = [p for doc in documents(path) if doc.get("kind") == "ConfigMap" and (p := part_of(doc))]
    source = assemble(found)
    if source is None:
        raise SourceError(
            f"no ConfigMap {CONFIGMAP} or labelled {PART_LABEL} that holds a topology key"
        )
    return source


def read_source(path: Path) -> tuple[str, str]:
    """(text, key or file name) of the source file, whatever form it has."""
    if is_objects(path):
        source = source_of(path)
        return text(source), source.key
    return read_text(path), path.name


def write_configmaps(path: Path, namespace: str, out: IO[str]) -> None:
    """The source as a YAML List of ConfigMaps, each under 1 MiB."""
    if is_objects(path):
        source = source_of(path)
        key, blocks = source.key, chunks(source)
    else:
        key, blocks = _key_of(path), _utf8(_file_blocks(path), str(path))
    parts = split(blocks, key)
    out.write("apiVersion: v1\nkind: List\nitems:\n")
    for obj in configmaps(parts, namespace):
        out.write(yaml.dump([obj], Dumper=_Dumper, sort_keys=False, width=1 << 30))


def _key_of(path: Path) -> str:
    """The key the file's content goes under: its name when that is a key, else its format
    from the first MiB (the YAML formats from the whole file when the head does not tell)."""
    if path.name in KEYS:
        return path.name
    with path.open("rb") as f:
        head = f.read(_HEAD)
    try:
        return detect(head.decode("utf-8", "ignore"))
    except SourceError:
        if len(head) < _HEAD:
            raise
    return detect(read_text(path))


def _file_blocks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while block := f.read(BLOCK):
            yield block


def _utf8(blocks: Iterator[bytes], where: str) -> Iterator[bytes]:
    """The blocks, checked as UTF-8 on the way (the API keeps text as text)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    try:
        for block in blocks:
            decoder.decode(block)
            offset += len(block)
            yield block
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as err:
        raise UsageError(f"{where}: not UTF-8 text (byte offset {offset + err.start})") from None


_BASE: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BASE):  # type: ignore[misc]
    """Multi-line text as a literal block, readable in `kubectl edit`."""


def _str(dumper: Any, value: str) -> Any:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)
