"""Reading YAML/JSON object files for the offline commands: every problem is a UsageError that
names the file (not UTF-8, not YAML, nested too deeply), never a traceback."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from common import yamlload
from common.cli import UsageError

STDIN = "-"
# One input file at most (a status list of thousands of nodes is tens of MiB).
MAX_INPUT = 512 * 1024 * 1024


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
    """The file's bytes; `-` is standard input. Regular files only (a FIFO would block, a device
    like /dev/zero never end) of at most MAX_INPUT bytes: UsageError naming the file otherwise."""
    if str(path) == STDIN:
        data = sys.stdin.buffer.read(MAX_INPUT + 1)
        if len(data) > MAX_INPUT:
            raise UsageError(f"standard input: more than {_mib(MAX_INPUT)}")
        return data
    # O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{path}: a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{path}: not a regular file")
        if st.st_size > MAX_INPUT:
            raise UsageError(f"{path}: larger than {_mib(MAX_INPUT)}")
        with os.fdopen(fd, "rb") as f:
            fd = -1  # the file object closes it now
            data = f.read(MAX_INPUT + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > MAX_INPUT:  # grew while read
        raise UsageError(f"{path}: larger than {_mib(MAX_INPUT)}")
    return data


def read_text(path: Path | str) -> str:
    """read_input as UTF-8 text; UsageError naming the file when it is not."""
    data = read_input(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(
            f"{path}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})"
        ) from None


def _mib(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB"


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
