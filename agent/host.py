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
        self._real = "" if str(self.root) == "/" else str(self.root)
        self.recording: Recording | None = Recording() if record else None
        self._dirs: dict[str, str] = {}

    def real(self, host_path: str) -> Path:
        """The path on this machine for a host path (no symlink resolution)."""
        return Path(self._real + host_path)

    def reset(self) -> None:
        """Forget resolved directories; call before each probe pass (devices come and go)."""
        self._dirs.clear()

    def resolve(self, host_path: str) -> str | None:
        """Canonical host path with every symlink followed inside the root; None if it loops."""
        return self._resolve(host_path, 0)

    def _resolve(self, host_path: str, hops: int) -> str | None:
        parent, _, name = host_path.rstrip("/").rpartition("/")
        if not name:
            return "/"
        base = self._dirs.get(parent) if parent else "/"
        if base is None:
            base = self._resolve(parent, hops)
            if base is None:
                return None
            self._dirs[parent] = base
        return self._step(base, name, hops)

    def _step(self, base: str, name: str, hops: int) -> str | None:
        if name == ".":
            return base
        if name == "..":
            return base.rsplit("/", 1)[0] or "/"
        candidate = f"{base.rstrip('/')}/{name}"
        real = self._real + candidate
        if not os.path.islink(real):
            return candidate
        if hops > 40:
            return None
        target = os.readlink(real)
        if self.recording is not None:
            self.recording.links[candidate] = target
        joined = target if target.startswith("/") else f"{base.rstrip('/')}/{target}"
        return self._resolve(os.path.normpath(joined), hops + 1)

    def exists(self, host_path: str) -> bool:
        canonical = self.resolve(host_path)
        if canonical is None or not self.real(canonical).exists():
            return False
        if self.recording is not None and self.real(canonical).is_dir():
            self.recording.dirs.add(canonical)
        return True

    def _fast(self, host_path: str) -> str | None:
        """Resolve only the directory: sysfs links are all relative, so opening the last component
        directly cannot leave the root. Recording needs every link, so it takes the slow path."""
        parent, _, name = host_path.rpartition("/")
        base = self._dirs.get(parent)
        if base is None:
            base = self._resolve(parent, 0)
            if base is None:
                return None
            self._dirs[parent] = base
        return f"{base.rstrip('/')}/{name}"

    def read_bytes(self, host_path: str) -> bytes | None:
        if self.recording is None and host_path.startswith("/sys/"):
            canonical = self._fast(host_path)
        else:
            canonical = self.resolve(host_path)
        if canonical is None:
            return None
        try:
            with open(self._real + canonical, "rb") as fh:
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
        real = self._real + canonical
        try:
            names = sorted(os.listdir(real))
        except OSError:
            return []
        if self.recording is not None:
            self.recording.dirs.add(canonical)
            for name in names:
                entry = f"{real}/{name}"
                if os.path.islink(entry):
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
