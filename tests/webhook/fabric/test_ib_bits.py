"""The column-wise reader's bit helpers (webhook/fabric/sources/ib/columns.py) against plain Python: a
fault in them would only show as the line parser's ~5x CPU, since the reader declines on any
exception, so each is checked here on its own."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.fabric.sources.ib import columns

HEX = "0123456789abcdef"


def _view(data: bytes) -> columns.U64:
    """Element i is the 8 bytes data[i:i+8], as the reader sees its window."""
    return columns._words(np.frombuffer(data + bytes(8), np.uint8))


@given(st.binary(min_size=1, max_size=40), st.integers(0, 255), st.integers(1, 3))
def test_find_is_the_first_byte_within_the_words_or_declines(
    data: bytes, char: int, words: int
) -> None:
    padded = data + bytes(8 * words)  # a window's bytes go on past the last start
    w = _view(padded)
    for s in range(len(data)):
        tail = padded[s : s + 8 * words]
        at = np.array([s], np.int64)
        if char in tail:
            assert columns._find(w, at, char, words).tolist() == [s + tail.index(char)]
        else:
            with pytest.raises(columns._Declined):
                columns._find(w, at, char, words)


@given(st.text(alphabet=HEX, min_size=1, max_size=16), st.binary(max_size=5))
def test_padded_puts_back_the_leading_zeros(guid: str, before: bytes) -> None:
    line = b"x" * 16 + before + b"(" + guid.encode() + b")"
    lo = len(line) - 1 - len(guid)
    hi, lo_ = np.array([len(line) - 1], np.int64), np.array([lo], np.int64)
    first, second = columns._padded(_view(line), lo_, hi)
    full = guid.rjust(16, "0").encode()
    assert int(first[0]) == int.from_bytes(full[:8], "little")
    assert int(second[0]) == int.from_bytes(full[8:], "little")


def test_padded_declines_an_empty_or_too_long_guid() -> None:
    line = b"x" * 40
    w = _view(line)
    for lo, hi in ((20, 20), (2, 19)):
        with pytest.raises(columns._Declined):
            columns._padded(w, np.array([lo], np.int64), np.array([hi], np.int64))


@given(st.text(alphabet=HEX, min_size=8, max_size=8))
def test_hex_word_reads_eight_lower_case_hex_digits(text: str) -> None:
    v = np.array([int.from_bytes(text.encode(), "little")], np.uint64)
    assert int(columns._hex_word(v)[0]) == int(text, 16)


@given(
    st.text(alphabet=HEX, min_size=7, max_size=7),
    st.integers(0, 7),
    st.characters(codec="ascii").filter(lambda c: c not in HEX),
)
def test_hex_word_declines_any_other_character(text: str, at: int, bad: str) -> None:
    word = (text[:at] + bad + text[at:]).encode()  # upper case too: the dump prints lower
    with pytest.raises(columns._Declined):
        columns._hex_word(np.array([int.from_bytes(word, "little")], np.uint64))
