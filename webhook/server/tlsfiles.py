"""The serving certificate's files at start: wait while they do not exist yet, refuse at once what
can never work.

On a first install the webhook starts before the cert bootstrap Job has written Secret
gpufabric-webhook-tls; the Deployment mounts it `optional`, so the files appear in the volume later.
Waiting (health ok, not ready) instead of exiting keeps the pod out of CrashLoopBackOff. A path that
exists but is a directory, not a regular file, too large, unreadable or not PEM is a wrong input:
one line, exit 2.
"""

from __future__ import annotations

import asyncio
import logging
import stat
from collections.abc import Sequence
from pathlib import Path

from common.cli import os_error

log = logging.getLogger(__name__)

MAX_BYTES = 1024 * 1024  # a PEM chain and key are a few KiB; anything near this is not one
Files = Sequence[tuple[str, Path]]  # (flag, path)


def problem(flag: str, path: Path) -> str | None:
    """Why an existing path can never be a certificate or key file (None: fine, or missing)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"{flag} {path}: {os_error(err)}"
    if stat.S_ISDIR(st.st_mode):
        return f"{flag} {path}: a directory, not a PEM file"
    if not stat.S_ISREG(st.st_mode):
        return f"{flag} {path}: not a regular file"
    if st.st_size > MAX_BYTES:
        return f"{flag} {path}: {st.st_size} bytes, not a PEM certificate or key"
    return None


def missing(files: Files) -> list[str]:
    """`FLAG PATH` of each file that does not exist (yet)."""
    return [f"{flag} {path}" for flag, path in files if not path.exists()]


async def wait_for(files: Files, stop: asyncio.Event, interval: float = 1.0) -> bool:
    """Until every file exists (True) or `stop` is set (False); one log line says what it waits
    for. Raises nothing: problem() is the caller's check, before and after."""
    absent = missing(files)
    if not absent:
        return True
    log.warning(
        "waiting for the certificate secret gpufabric-webhook-tls (written by the cert bootstrap "
        "Job): the certificate files do not exist yet; not ready meanwhile",
        extra={"missing": absent},
    )
    while missing(files):
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            continue
        return False
    log.info("certificate files present", extra={"files": [str(p) for _, p in files]})
    return True
