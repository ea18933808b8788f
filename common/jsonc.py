"""JSON with // and /* */ comments and trailing commas, as cufile.json is written."""

from __future__ import annotations

import json
import re
from typing import Any


class JsoncError(ValueError):
    pass


# Left to right, the first token that starts at a place wins, as a scanner reading the text would:
# a string (to its closing quote, or to the end when it has none), a // comment (up to the newline),
# a /* comment, an unterminated /*, or a comma with only whitespace before a closing bracket.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|//[^\n]*|/\*.*?\*/|/\*|,(?=[ \t\r\n]*[}\]])', re.S)


def _keep(m: re.Match[str]) -> str:
    piece = m.group()
    if piece[0] == '"':
        return piece
    if piece == "/*":
        raise JsoncError("unterminated /* comment")
    if piece.startswith("/*"):
        return "\n" * piece.count("\n")
    return ""  # a // comment or a trailing comma


def strip(text: str) -> str:
    """Remove comments and trailing commas outside strings; keeps line numbers intact."""
    return _TOKEN.sub(_keep, text)


def loads(text: str) -> Any:
    try:
        return json.loads(strip(text))
    except json.JSONDecodeError as err:
        raise JsoncError(f"line {err.lineno} column {err.colno}: {err.msg}") from err
