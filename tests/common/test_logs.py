"""Log lines from hostile strings (issue 11): escaped, bounded, never more than one line."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from common import logs


def record(msg: str, exc: bool = False, **extra: object) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("bad\nFAKE 2026-01-01 INFO forged: line")
        except ValueError:
            import sys

            exc_info = sys.exc_info()
    r = logging.makeLogRecord(
        {"name": "webhook", "levelno": 20, "levelname": "INFO", "msg": msg, "exc_info": exc_info}
    )
    r.__dict__.update(extra)
    return r


UID = (
    "abc\n2026-11-22 16:00:00,000 INFO webhook: admission uid=forged outcome=mutated\r\x1b[2J\u2028"
)


@pytest.mark.parametrize(
    "formatter", [logs.TextFormatter(), logs.JsonFormatter()], ids=["text", "json"]
)
def test_uids_with_newlines_forge_no_lines(formatter: logging.Formatter) -> None:
    line = formatter.format(record("admission", uid=UID, outcome="denied"))
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\u2028" not in line
    if isinstance(formatter, logs.JsonFormatter):
        assert json.loads(line)["uid"].startswith("abc\\n2026")
    else:
        assert "uid=abc\\n2026-11-22" in line and "\\x1b[2J" in line


@pytest.mark.parametrize(
    "formatter", [logs.TextFormatter(), logs.JsonFormatter()], ids=["text", "json"]
)
def test_huge_values_are_cut(formatter: logging.Formatter) -> None:
    line = formatter.format(record("x" * 100_000, value="v" * 100_000))
    assert len(line) < 2000
    assert "(+98976 chars)" in line and "(+99744 chars)" in line


def test_tracebacks_stay_indented_under_their_record() -> None:
    text = logs.TextFormatter().format(record("admission failed", exc=True))
    first, *rest = text.split("\n")
    assert first.endswith("admission failed") and rest
    assert all(line.startswith("    ") for line in rest)


def test_safe_escapes_backslashes_so_escapes_cannot_be_faked() -> None:
    assert logs.safe("a\\nb") == "a\\\\nb"
    assert logs.safe("a\nb") == "a\\nb"


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("restore_root")
def test_leader_election_info_is_quiet_unless_debug(capsys: pytest.CaptureFixture[str]) -> None:
    lib = logging.getLogger("leaderelection")
    logs.configure("info")
    lib.info("node-1 successfully acquired lease")
    lib.warning("leader election failed")
    logging.getLogger("webhook").info("kept")
    err = capsys.readouterr().err
    assert "successfully acquired lease" not in err
    assert "leader election failed" in err and "kept" in err
    logs.configure("debug")
    lib.info("node-1 successfully acquired lease")
    assert "successfully acquired lease" in capsys.readouterr().err
