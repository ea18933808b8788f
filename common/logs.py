"""Logging setup for both programs: plain text by default, one JSON object a line on request."""

from __future__ import annotations

import argparse
import json
import logging
import sys

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        extra = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        return base + "".join(f" {k}={v}" for k, v in extra.items())


def add_arguments(parser: argparse.ArgumentParser, *, repeat: bool = False) -> None:
    """--log-level and --log-json, the same on both programs.

    repeat=True adds them again to a subcommand's parser, so they are accepted after the
    subcommand too; there they have no default and override the value given before it."""
    parser.add_argument(
        "--log-level",
        default=argparse.SUPPRESS if repeat else "info",
        choices=["debug", "info", "warning", "error"],
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
    handler.setFormatter(
        JsonFormatter()
        if json_logs
        else TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
