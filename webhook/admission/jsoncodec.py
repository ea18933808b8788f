"""The webhook's JSON on the admission hot path: orjson where it gives exactly what the standard
library gives, the standard library itself everywhere else.

orjson decodes a review in half of json.loads's time and encodes the patch and the reply in a
tenth of json's (bench/webhook_bench.py has the numbers), but it differs at the edges. Decoding:
integers beyond 64 bits become floats, it accepts nesting (up to 1024) that json.loads refuses
with RecursionError, and it refuses what json.loads accepts (NaN, Infinity, 1e400, lone
surrogates, UTF-16/32, a BOM, nesting over 1024) or refuses with its own message.
Encoding: it writes non-ASCII and DEL raw where json (ensure_ascii) escapes them, and refuses
integers beyond 64 bits, non-string keys and subclasses (with the passthrough options). Each of
those cases is detected cheaply and handed to the standard library, so results, bytes and
exceptions are the standard library's in every case (RecursionError included, for callers less
than 480 frames deep; tests/webhook/admission/test_jsoncodec.py).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_DIGITS = bytes.maketrans(b"0123456789", b"0" * 10)
_RUN = b"0" * 19  # -2**63 - 1 and 2**64 have 19 and 20 digits: anything shorter fits 64 bits
# json.loads recurses once per level and raises RecursionError when the caller's stack plus the
# depth passes the recursion limit (1000); orjson goes to 1024. Up to this many opening brackets
# (so levels) the two agree for any caller less than 480 frames deep. Reviews have 60-200.
_LEVELS = 512
_NOT_OPENING = bytes(range(256)).translate(None, b"[{")


def _orjson_reads(body: bytes, openings: int | None) -> bool:
    """Whether orjson's value for body is json.loads's: at most _LEVELS brackets and no run of
    19 digits (orjson makes an integer beyond 64 bits a float). A run of 19 covers two
    consecutive multiples of 9, so the bytes at every 9th position show two adjacent digits
    first: that sample costs half of the full scan, which only runs then."""
    if openings is None:
        openings = len(body.translate(None, _NOT_OPENING))
    if openings > _LEVELS:
        return False
    return b"00" not in body[::9].translate(_DIGITS) or _RUN not in body.translate(_DIGITS)


def loads(body: bytes, openings: int | None = None) -> Any:
    """json.loads(body): the same value, or the same exception with the same message.
    `openings`: the number of "{" and "[" in body, when the caller has counted them."""
    if _orjson_reads(body, openings):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass  # json.loads may accept it (see above), else it raises its own error
    return json.loads(body)


_compact = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode
# Subclasses of str/int/dict/list, dataclasses and dates raise in orjson: json decides them.
_STRICT = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def dumps(value: Any) -> bytes:
    """Compact JSON, byte for byte `json.dumps(value, separators=(",", ":")).encode()`.

    For the trees the webhook builds its replies from: dicts, lists and tuples of str, int, bool
    and None. Floats never reach it (orjson writes 1e-05 as 0.00001 and NaN as null), nor Enum
    or UUID members (orjson writes them, json refuses them): the patch holds the webhook's own
    strings and integers, the reply review.py's typed fields
    (tests/webhook/admission/test_jsoncodec.py checks both over the property-test pods)."""
    try:
        out = orjson.dumps(value, option=_STRICT)
    except orjson.JSONEncodeError:
        pass  # a big integer, a non-string key, a lone surrogate, a subclass: json's output
    else:
        # json escapes every byte above 0x7e: ASCII-only output without DEL is already its own.
        if out.isascii() and b"\x7f" not in out:
            return out
    return _compact(value).encode()
