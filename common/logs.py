"""Logging setup for both programs: plain text by default, one JSON object a line on request.

Log lines carry strings from outside (request uids, pod names, annotation values, error texts).
Every message and extra value is escaped (control and line-separator characters become `\\n`,
`\\x1b`, `\\u2028` ...) and cut to a bounded length, so a hostile value can neither forge a log line
nor grow the log without bound.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from typing import Any

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
LEVELS = ("debug", "info", "warning", "error")
MAX_VALUE = 256  # characters of one extra value
MAX_MESSAGE = 1024  # characters of a message
MAX_EXCEPTION = 8192  # characters of a traceback
# C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escape_char(match: re.Match[str]) -> str:
    c = match.group()
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return named.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def safe(value: object, limit: int = MAX_VALUE) -> str:
    """One line of at most about `limit` characters, whatever `value` holds."""
    text = value if isinstance(value, str) else str(value)
    cut = len(text) - limit
    if cut > 0:
        text = text[:limit]
    text = _UNSAFE.sub(_escape_char, text.replace("\\", "\\\\"))
    return f"{text}…(+{cut} chars)" if cut > 0 else text


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


def _exception(formatter: logging.Formatter, record: logging.LogRecord) -> str:
    text = formatter.formatException(record.exc_info) if record.exc_info else ""
    if len(text) > MAX_EXCEPTION:
        text = text[:MAX_EXCEPTION] + f"…(+{len(text) - MAX_EXCEPTION} chars)"
    return text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": safe(record.getMessage(), MAX_MESSAGE),
        }
        for k, v in _extras(record).items():
            out[safe(k, 64)] = v if isinstance(v, bool | int | float) or v is None else safe(v)
        if record.exc_info:
            out["exc"] = _exception(self, record)
        return json.dumps(out)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        head = "%s %s %s: %s" % (  # noqa: UP031 - the same layout as logging's %-style format
            self.formatTime(record),
            record.levelname,
            record.name,
            safe(record.getMessage(), MAX_MESSAGE),
        )
        head += "".join(f" {safe(k, 64)}={safe(v)}" for k, v in _extras(record).items())
        if record.exc_info:
            # Continuation lines are indented: nothing in a traceback can pass for a record.
            exc = _exception(self, record)
            head += "".join("\n    " + safe(line, MAX_EXCEPTION) for line in exc.splitlines())
        return head


class QuietLibraries(logging.Filter):
    """kubernetes.leaderelection logs every renewal ("successfully acquired lease", every 2 s) at
    INFO: its INFO lines are shown only at --log-level debug; its warnings and errors always."""

    NAMES = ("leaderelection",)

    def __init__(self, show_info: bool) -> None:
        super().__init__()
        self.show_info = show_info

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING or self.show_info:
            return True
        return not any(record.name == n or record.name.startswith(n + ".") for n in self.NAMES)


def add_arguments(parser: argparse.ArgumentParser, *, repeat: bool = False) -> None:
    """--log-level and --log-json, the same on both programs.

    repeat=True adds them again to a subcommand's parser, so they are accepted after the
    subcommand too; there they have no default and override the value given before it."""
    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default=argparse.SUPPRESS if repeat else "info",
        help="log messages at this level and above, on stderr (default: info)",
    )
    parser.add_argument(
        "--log-json",
        action="store_true",
        default=argparse.SUPPRESS if repeat else False,
        help="one JSON object per log line (default: plain text)",
    )


def configure(level: str = "info", json_logs: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_logs else TextFormatter())
    handler.addFilter(QuietLibraries(show_info=level.lower() == "debug"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
