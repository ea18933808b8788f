"""JSON with // and /* */ comments and trailing commas, as cufile.json is written."""

from __future__ import annotations

import json
from typing import Any


class JsoncError(ValueError):
    pass


def strip(text: str) -> str:
    """Remove comments and trailing commas outside strings; keeps line numbers intact."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
            continue
        if c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JsoncError("unterminated /* comment")
            out.append("\n" * text.count("\n", i, end))
            i = end + 2
        elif c == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "}]":
                i += 1  # trailing comma
                continue
            out.append(c)
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def loads(text: str) -> Any:
    try:
        return json.loads(strip(text))
    except json.JSONDecodeError as err:
        raise JsoncError(f"line {err.lineno} column {err.colno}: {err.msg}") from err
