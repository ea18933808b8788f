"""The only module that opens host files; each probe reads through a HostReader.

Paths are host-absolute strings ("/sys/bus/pci/devices"); the reader maps them under a root, so
the agent runs against "/" on a host, "/host" in a pod and a fixture directory in tests. Symlinks
are resolved inside the root, never against the machine the code runs on.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

_MAX_READ = 1 << 20  # sysfs attributes are one page; config files are small


@dataclass
class Recording:
    """What a probe run read, in canonical (symlink-free) form plus the symlinks followed."""

    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)


class HostReader:
    def __init__(self, root: Path | str = "/", *, record: bool = False) -> None:
        self.root = Path(root).resolve()
        self.recording: Recording | None = Recording() if record else None

    def real(self, host_path: str) -> Path:
        """The path on this machine for a host path (no symlink resolution)."""
        return self.root / host_path.lstrip("/")

    def _host(self, real: Path) -> str | None:
        try:
            rel = real.relative_to(self.root)
        except ValueError:
            return None
        return "/" + str(rel) if str(rel) != "." else "/"

    def resolve(self, host_path: str) -> str | None:
        """Canonical host path with every symlink followed inside the root; None if it escapes."""
        current = self.root
        parts = [p for p in host_path.split("/") if p]
        hops = 0
        while parts:
            part = parts.pop(0)
            if part == "..":
                current = current.parent if current != self.root else current
                continue
            if part == ".":
                continue
            candidate = current / part
            if candidate.is_symlink():
                hops += 1
                if hops > 40:
                    return None
                target = os.readlink(candidate)
                if self.recording is not None:
                    host = self._host(candidate)
                    if host is not None:
                        self.recording.links[host] = target
                if target.startswith("/"):
                    current = self.root
                parts = [p for p in target.split("/") if p] + parts
                continue
            current = candidate
        return self._host(current)

    def exists(self, host_path: str) -> bool:
        canonical = self.resolve(host_path)
        if canonical is None or not self.real(canonical).exists():
            return False
        if self.recording is not None and self.real(canonical).is_dir():
            self.recording.dirs.add(canonical)
        return True

    def read_bytes(self, host_path: str) -> bytes | None:
        canonical = self.resolve(host_path)
        if canonical is None:
            return None
        try:
            with self.real(canonical).open("rb") as fh:
                data = fh.read(_MAX_READ)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as err:
            # Unreadable attribute (EACCES, EINVAL on sysfs, EIO): treat as absent, say so.
            log.debug("unreadable host file", extra={"path": host_path, "error": str(err)})
            return None
        if self.recording is not None:
            self.recording.files[canonical] = data
        return data

    def read(self, host_path: str) -> str | None:
        """Text content with surrounding whitespace stripped, or None if absent or unreadable."""
        data = self.read_bytes(host_path)
        if data is None:
            return None
        return data.decode("utf-8", errors="replace").strip()

    def listdir(self, host_path: str) -> list[str]:
        """Sorted entry names; symlinks among them are recorded as links."""
        canonical = self.resolve(host_path)
        if canonical is None:
            return []
        real = self.real(canonical)
        try:
            names = sorted(os.listdir(real))
        except OSError:
            return []
        if self.recording is not None:
            self.recording.dirs.add(canonical)
            for name in names:
                entry = real / name
                if entry.is_symlink():
                    self.recording.links[f"{canonical.rstrip('/')}/{name}"] = os.readlink(entry)
        return names

    def basename_of_link(self, host_path: str) -> str | None:
        canonical = self.resolve(host_path)
        return None if canonical is None else canonical.rsplit("/", 1)[-1]


def parse_int(text: str | None, base: int = 10) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip(), base)
    except ValueError:
        return None
