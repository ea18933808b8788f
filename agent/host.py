"""The only module that opens host files; each probe reads through a HostReader.

Paths are host-absolute strings ("/sys/bus/pci/devices"); the reader maps them under a root, so
the agent runs against "/" on a host, "/host" in a pod, a fixture directory in tests, or a gather
archive held in memory. Symlinks are resolved inside the root the way chroot would (an absolute
target starts at the root, `..` stops at it), on every path: a read never leaves the root.

A host tree can be hostile (a FIFO where an attribute should be, a link to /etc/passwd, a chmod 000
directory): reads never block (O_NONBLOCK, regular files only), are bounded, and whatever could not
be read is noted in `issues` for the probe's condition instead of raising.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

MAX_READ = 1 << 20  # sysfs attributes are one page; config files are small
_CHUNK = 1 << 16
_MAX_HOPS = 40  # the kernel's MAXSYMLINKS
_OPEN_FLAGS = (
    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
)

FILE, DIR, LINK, OTHER = "file", "dir", "link", "other"
_KIND_OF = {stat.S_IFREG: FILE, stat.S_IFDIR: DIR, stat.S_IFLNK: LINK}
_UNSEEN = "?"  # not in a per-pass cache yet (None there is an answer: absent, or loops)


class NotRegular(OSError):
    """A FIFO, socket or device where a host file should be: never opened for reading."""


class IsLink(OSError):
    """The last component is a symlink (the reader resolves it itself, inside the root)."""


class HostTree(Protocol):
    """The storage behind a reader: a directory on disk or an archive in memory.

    Paths are canonical host paths (no symlink in any directory component)."""

    def kind(self, path: str) -> str | None:
        """FILE, DIR, LINK or OTHER without following a last-component link; None if absent."""

    def readlink(self, path: str) -> str: ...

    def read(self, path: str, limit: int) -> bytes:
        """Content of a regular file; raises IsLink, NotRegular, FileNotFoundError, OSError."""

    def listdir(self, path: str) -> dict[str, str]:
        """Entry name -> kind (as `kind` says, LINK for symlinks)."""


class DiskTree:
    def __init__(self, root: Path) -> None:
        self.prefix = "" if str(root) == "/" else str(root)

    def kind(self, path: str) -> str | None:
        try:
            mode = os.lstat(self.prefix + path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None
        return _KIND_OF.get(stat.S_IFMT(mode), OTHER)

    def readlink(self, path: str) -> str:
        return os.readlink(self.prefix + path)

    def read(self, path: str, limit: int) -> bytes:
        try:
            fd = os.open(self.prefix + path, _OPEN_FLAGS)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise IsLink(errno.ELOOP, "symbolic link", path) from None
            if err.errno == errno.ENXIO:  # a socket
                raise NotRegular(errno.ENXIO, "not a regular file", path) from None
            raise
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                if stat.S_ISDIR(mode):
                    raise IsADirectoryError(errno.EISDIR, "is a directory", path)
                raise NotRegular(errno.EINVAL, "not a regular file", path)
            data = os.read(fd, _CHUNK)
            if len(data) < _CHUNK:
                return data
            parts = [data]
            size = len(data)
            while size <= limit:
                more = os.read(fd, _CHUNK)
                if not more:
                    break
                parts.append(more)
                size += len(more)
            return b"".join(parts)
        finally:
            os.close(fd)

    def listdir(self, path: str) -> dict[str, str]:
        # scandir's d_type tells links apart without one lstat per entry.
        with os.scandir(self.prefix + path) as it:
            return {
                e.name: LINK
                if e.is_symlink()
                else DIR
                if e.is_dir(follow_symlinks=False)
                else FILE
                if e.is_file(follow_symlinks=False)
                else OTHER
                for e in it
            }


def read_local(path: str | Path, limit: int) -> bytes:
    """A file of this machine named on the command line (not a host path): followed links, then
    a regular file only, never blocking (a FIFO, /dev/zero), at most `limit` bytes; else OSError
    whose strerror says why."""
    data = DiskTree(Path("/")).read(os.path.realpath(path), limit)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit >> 20} MiB", str(path))
    return data


@dataclass
class MemoryTree:
    """A host tree held in memory (a gather archive): files, symlinks, directories by host path."""

    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)
    _children: dict[str, list[str]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.dirs.add("/")
        children: dict[str, set[str]] = {}
        for path in (*self.files, *self.links, *self.dirs):
            while path != "/":
                parent, _, name = path.rpartition("/")
                parent = parent or "/"
                self.dirs.add(parent)
                children.setdefault(parent, set()).add(name)
                path = parent
        self._children = {d: sorted(names) for d, names in children.items()}

    def kind(self, path: str) -> str | None:
        if path in self.links:
            return LINK
        if path in self.files:
            return FILE
        return DIR if path in self.dirs else None

    def readlink(self, path: str) -> str:
        try:
            return self.links[path]
        except KeyError:
            raise OSError(errno.EINVAL, "not a symbolic link", path) from None

    def read(self, path: str, limit: int) -> bytes:
        data = self.files.get(path)
        if data is not None:
            return data
        if path in self.links:
            raise IsLink(errno.ELOOP, "symbolic link", path)
        if path in self.dirs:
            raise IsADirectoryError(errno.EISDIR, "is a directory", path)
        raise FileNotFoundError(errno.ENOENT, "no such file", path)

    def listdir(self, path: str) -> dict[str, str]:
        if path not in self.dirs:
            raise FileNotFoundError(errno.ENOENT, "no such directory", path)
        base = path.rstrip("/")
        return {n: self.kind(f"{base}/{n}") or FILE for n in self._children.get(path, ())}


@dataclass
class Recording:
    """What a probe run read, in canonical (symlink-free) form plus the symlinks followed."""

    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)


class HostReader:
    def __init__(
        self, root: Path | str = "/", *, record: bool = False, tree: HostTree | None = None
    ) -> None:
        self.root = Path(root).resolve() if tree is None else Path("/")
        self.tree: HostTree = tree if tree is not None else DiskTree(self.root)
        self.recording: Recording | None = Recording() if record else None
        self.issues: list[str] = []  # "path: what was wrong", for the probe's condition
        # One probe pass is one snapshot of the host: within it, a path resolved or an entry's
        # kind seen once is reused (a link is stat'ed and read once, however many paths cross
        # it); reset() forgets both, so the next pass sees links swapped in between.
        self._canon: dict[str, str | None] = {}  # host path -> canonical path, None if it loops
        self._kinds: dict[str, str | None] = {}  # canonical path -> kind (listdir or lstat)

    def reset(self) -> None:
        """Forget resolved paths, kinds and issues; call before each probe pass."""
        self._canon.clear()
        self._kinds.clear()
        self.issues.clear()

    def note(self, host_path: str, problem: str) -> None:
        """Record that a host file exists but could not be used (unreadable, unparsable)."""
        text = f"{host_path}: {problem}"
        if text not in self.issues:
            self.issues.append(text)

    def resolve(self, host_path: str) -> str | None:
        """Canonical host path with every symlink followed inside the root; None if it loops."""
        path = host_path.rstrip("/")
        return self._canonical(path) if path else "/"

    def _canonical(self, path: str, hops: int = 0) -> str | None:
        """`path` (absolute, no trailing slash) with each component resolved, parents first."""
        canon = self._canon
        found = canon.get(path, _UNSEEN)
        if found is not _UNSEEN:
            return found
        parent, _, name = path.rpartition("/")
        base = canon.get(parent, _UNSEEN) if parent else "/"
        if base is _UNSEEN:
            base = self._canonical(parent, hops)
        if base is None or name == "" or name == ".":
            found = base
        elif name == "..":
            found = base.rpartition("/")[0] or "/"
        else:
            found = f"{base}/{name}" if base != "/" else f"/{name}"
            kind = self._kinds.get(found, _UNSEEN)
            if kind is _UNSEEN:
                kind = self._kind(found)
            if kind == LINK:
                found = self._follow(base, found, hops)
        canon[path] = found
        return found

    def _kind(self, path: str) -> str | None:
        try:
            kind = self._kinds[path] = self.tree.kind(path)
        except OSError as err:  # EACCES on a parent: not a link we can see; reads say why
            log.debug("cannot stat host path", extra={"path": path, "error": str(err)})
            return None
        return kind

    def _follow(self, base: str, link: str, hops: int) -> str | None:
        """Where `link` (canonical `base` + one name) leads, resolved inside the root."""
        if hops >= _MAX_HOPS:
            self.note(link, "too many levels of symbolic links")
            return None
        try:
            target = self.tree.readlink(link)
        except OSError as err:
            self.note(link, f"unreadable link ({err.strerror})")
            return None
        if self.recording is not None:
            self.recording.links[link] = target
        joined = target if target.startswith("/") else f"{base.rstrip('/')}/{target}"
        # Lexical: "/.." is "/", so `..` never climbs out of the root.
        return self._canonical(os.path.normpath(joined).rstrip("/"), hops + 1)

    def exists(self, host_path: str) -> bool:
        canonical = self.resolve(host_path)
        if canonical is None:
            return False
        kind = self._kinds.get(canonical, _UNSEEN)
        if kind is _UNSEEN:
            try:
                kind = self._kinds[canonical] = self.tree.kind(canonical)
            except OSError as err:
                self.note(host_path, f"cannot check ({err.strerror})")
                return False
        if kind is None:
            return False
        if self.recording is not None and kind == DIR:
            self.recording.dirs.add(canonical)
        return True

    def read_bytes(self, host_path: str) -> bytes | None:
        parent, _, name = host_path.rpartition("/")
        if self.recording is None and name not in ("", ".", ".."):
            # The directory is resolved (once a pass); the last component is opened O_NOFOLLOW.
            base = self._canon.get(parent, _UNSEEN)
            if base is _UNSEEN:
                base = self._canonical(parent)
            canonical = None if base is None else f"{base}/{name}" if base != "/" else f"/{name}"
        else:
            canonical = self.resolve(host_path)
        if canonical is None:
            return None
        try:
            data = self.tree.read(canonical, MAX_READ)
        except IsLink:
            # The last component is a link: follow it inside the root, never let the OS do it.
            canonical = self.resolve(host_path)
            if canonical is None:
                return None
            try:
                data = self.tree.read(canonical, MAX_READ)
            except IsLink:  # swapped for a link in between: give up rather than follow
                self.note(host_path, "changed while being read")
                return None
            except (FileNotFoundError, NotADirectoryError):
                # Attributes are files, never links; one that leads nowhere is worth a word.
                self.note(host_path, "link leads nowhere inside the host root")
                return None
            except OSError as err:
                self._unreadable(host_path, err)
                return None
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as err:
            self._unreadable(host_path, err)
            return None
        if len(data) > MAX_READ:
            self.note(host_path, f"larger than {MAX_READ} bytes")
            return None
        if self.recording is not None:
            self.recording.files[canonical] = data
        return data

    def _unreadable(self, host_path: str, err: OSError) -> None:
        if isinstance(err, IsADirectoryError):
            self.note(host_path, "a directory where a file should be")
        elif isinstance(err, NotRegular):
            self.note(host_path, "not a regular file")
        elif err.errno in (errno.EINVAL, errno.EIO, errno.ENODATA, errno.EOPNOTSUPP):
            # sysfs attributes the device cannot report right now (a port without a cable).
            log.debug("unreadable host file", extra={"path": host_path, "error": err.strerror})
        else:
            self.note(host_path, f"unreadable ({err.strerror})")

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
        try:
            entries = self.tree.listdir(canonical)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as err:
            self.note(host_path, f"unreadable directory ({err.strerror})")
            return []
        base = canonical.rstrip("/")
        for name, kind in entries.items():
            self._kinds[f"{base}/{name}"] = kind
        if self.recording is not None:
            self.recording.dirs.add(canonical)
            for name, kind in entries.items():
                entry = f"{base}/{name}"
                if kind == DIR:  # a listing is data too (netdev names), even if never entered
                    self.recording.dirs.add(entry)
                elif kind == LINK:
                    try:
                        self.recording.links[entry] = self.tree.readlink(entry)
                    except OSError:
                        continue
        return sorted(entries)

    def basename_of_link(self, host_path: str) -> str | None:
        canonical = self.resolve(host_path)
        return None if canonical is None else canonical.rsplit("/", 1)[-1]
