"""common.jsonc.strip against the character-by-character scanner it replaced (kept here as the
oracle): the same text out, or the same error, for any text made of the characters that matter."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.jsonc import JsoncError, loads, strip


def scanner(text: str) -> str:
    """The scanner common.jsonc used before: one character at a time, tracking strings."""
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


def outcome(fn: object, text: str) -> str:
    assert callable(fn)
    try:
        return str(fn(text))
    except JsoncError as err:
        return f"JsoncError: {err}"


TOKENS = [
    '"',
    "\\",
    "/",
    "*",
    ",",
    " ",
    "\n",
    "\t",
    "\r",
    "}",
    "]",
    "{",
    "[",
    ":",
    "a",
    "1",
    "//",
    "/*",
    "*/",
]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map("".join))
def test_strip_matches_the_scanner(text: str) -> None:
    assert outcome(strip, text) == outcome(scanner, text)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": "x // not a comment", /* c\n */ "b": [1, 2,],\n}',
        '{"url": "http://host/*x*/", "esc": "q\\"//", // tail\n "z": 0,}',
        '"unterminated \\',
        "/*/",
        "/**/,]",
    ],
)
def test_strip_examples(text: str) -> None:
    assert outcome(strip, text) == outcome(scanner, text)


def test_loads_still_names_line_and_column() -> None:
    with pytest.raises(JsoncError, match="line 3 column"):
        loads('{\n /* two\n lines */ "a": }')
