"""A large text as pieces that each end at a line end, read again from the start on each call.

The labeler streams a source of ConfigMap parts through the ibnetdiscover parse this way, without
holding its whole text (222 MB at 65,536 nodes); a problem's line number is found by a second pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

Chunks = Callable[[], Iterator[str]]
_CHUNK = 1 << 20  # characters split into lines at a time


def pieces(text: str, size: int = _CHUNK) -> Iterator[str]:
    """`text` in pieces of about `size` characters, each ending at a line end: the lines of all
    pieces are the lines of `text`, without a list of every line of a 200 MB dump (it would
    cost more than the dump itself)."""
    start, length = 0, len(text)
    while start < length:
        end = text.find("\n", start + size)
        end = length if end < 0 else end + 1
        yield text[start:end]
        start = end


def chunked(text: str | Chunks, size: int = _CHUNK) -> Chunks:
    """A dump given as text or as Chunks, as Chunks (of about `size` characters)."""
    if isinstance(text, str):
        return lambda: pieces(text, size)
    return text


def head(src: Chunks, size: int = 200_000) -> str:
    """The first `size` characters or so (whole chunks): enough to tell the format."""
    got: list[str] = []
    stream = src()
    for chunk in stream:
        got.append(chunk)
        if sum(map(len, got)) >= size:
            break
    close = getattr(stream, "close", None)
    if close is not None:
        close()
    return "".join(got)


def split(chunk: str) -> list[str]:
    """The lines of a piece. Only a newline ends a line (as `sed -n Np` and editors count them):
    str.splitlines would also break at a form feed or a vertical tab inside a description."""
    got = chunk.split("\n")
    if got[-1] == "":
        got.pop()
    return got


def lines(text: str | Chunks) -> Iterator[str]:
    """The lines of `text` (see `split`), a chunk at a time."""
    for chunk in chunked(text)():
        yield from split(chunk)
