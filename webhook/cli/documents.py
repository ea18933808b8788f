"""Reading YAML/JSON object files for the offline commands: every problem is a UsageError that
names the file (not UTF-8, not YAML, nested too deeply), never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from common import yamlload
from common.cli import UsageError

STDIN = "-"


def parse_documents(text: bytes, where: str) -> list[Any]:
    """Every YAML (or JSON) document in text; UsageError naming `where` when it is not that."""
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(
            f"{where}: not UTF-8 text (byte 0x{text[err.start]:02x} at offset {err.start})"
        ) from None
    try:
        return list(yamlload.load_all(decoded))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or type(err).__name__
        raise UsageError(f"{where}: not YAML or JSON: {problem}{at}") from None
    except RecursionError:
        raise UsageError(f"{where}: nested too deeply") from None


def read_input(path: Path | str) -> bytes:
    """The file's bytes; `-` is standard input."""
    if str(path) == STDIN:
        return sys.stdin.buffer.read()
    return Path(path).read_bytes()


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
    return [path]


def objects(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(file, object) for every object in the file or directory, List items unpacked."""
    for f in _files(path):
        for doc in parse_documents(read_input(f), str(f)):
            if not isinstance(doc, dict):
                continue
            kind = doc.get("kind")
            if isinstance(kind, str) and kind.endswith("List"):
                items = doc.get("items")
                yield from ((str(f), d) for d in items or [] if isinstance(d, dict))
            else:
                yield str(f), doc


def documents(path: Path) -> list[dict[str, Any]]:
    """Every object in the file or directory (List items unpacked), for other offline commands."""
    return [doc for _, doc in objects(path)]
