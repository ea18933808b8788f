"""Handing freed memory back to the system (glibc's malloc_trim; a no-op elsewhere, e.g. musl).

glibc keeps what a burst freed (a relist page, a review body of megabytes) for reuse, so the RSS of
a long-running process stays at its highest point; trimming after such a burst brings it back.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable


def _trimmer() -> Callable[[], object]:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    return lambda: trim(0)


release_memory = _trimmer()
