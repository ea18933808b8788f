"""The gather format: a tar.gz of exactly the host files the probes read plus an NVML snapshot.

Layout: `gather.json` (format, node, NVML snapshot, probe options, provenance) and `host/...`
(files, directories and symlinks as read). `probe --from` loads it into memory and runs the same
probes against it, so it reproduces the status on any machine.

Symlink targets are stored relative and inside `host/` (an ordinary CUDA host has
`/usr/local/cuda -> /usr/local/cuda-12.4`, and tar's safe extraction refuses absolute links); the
reader resolves links the way chroot does, so the rewritten link leads to the same file. Targets
that were rewritten keep their original text in gather.json `links`.
"""

from __future__ import annotations

import io
import json
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent import tarball
from agent.host import HostReader, MemoryTree, Recording, read_local

if TYPE_CHECKING:
    import tarfile

FORMAT = 1
META = "gather.json"


class GatherError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Snapshot:
    meta: dict[str, Any]
    tree: MemoryTree | None = None  # the host tree in memory (load)
    root: Path = Path("/nonexistent")  # the unpacked host root on disk (open_snapshot)

    @property
    def nvml(self) -> dict[str, Any]:
        return dict(self.meta.get("nvml") or {"error": {"reason": "NotGathered", "message": ""}})

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.meta.get("options") or {})

    def reader(self) -> HostReader:
        return HostReader(tree=self.tree) if self.tree is not None else HostReader(self.root)


def portable_target(link: str, target: str) -> str:
    """A link's target, relative to its directory, that reaches the same place inside the root.

    Lexical, like HostReader: an absolute target starts at the root and `..` stops there."""
    parent = posixpath.dirname(link) or "/"
    joined = target if target.startswith("/") else f"{parent}/{target}"
    absolute = "/" + posixpath.normpath(joined).lstrip("/")
    return posixpath.relpath(absolute, parent)


def _info(name: str, kind: bytes, size: int = 0, link: str = "") -> tarfile.TarInfo:
    import tarfile

    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.linkname = link
    info.mtime = 0
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o777 if kind == tarfile.SYMTYPE else 0o644
    return info


def write(path: Path, recording: Recording, meta: dict[str, Any]) -> int:
    """Write the archive deterministically (sorted, zero mtimes); returns the number of entries."""
    import gzip
    import tarfile

    portable = {link: portable_target(link, target) for link, target in recording.links.items()}
    rewritten = {
        k: recording.links[k] for k, v in sorted(portable.items()) if v != recording.links[k]
    }
    body = dict(meta, format=FORMAT)
    if rewritten:
        body["links"] = rewritten
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        data = json.dumps(body, indent=2, sort_keys=True).encode()
        tar.addfile(_info(META, tarfile.REGTYPE, len(data)), io.BytesIO(data))
        entries: dict[str, tuple[bytes, str, bytes]] = {}
        for d in recording.dirs:
            entries.setdefault(d, (tarfile.DIRTYPE, "", b""))
        for link, target in portable.items():
            entries[link] = (tarfile.SYMTYPE, target, b"")
        for name, content in recording.files.items():
            entries[name] = (tarfile.REGTYPE, "", content)
        for name in sorted(entries):
            kind, target, content = entries[name]
            member = "host" + name if name != "/" else "host"
            tar.addfile(_info(member, kind, len(content), target), io.BytesIO(content))
    try:
        with (
            path.open("wb") as fh,
            gzip.GzipFile(filename="", fileobj=fh, mode="wb", mtime=0) as gz,
        ):
            gz.write(raw.getvalue())
    except OSError as err:
        raise GatherError(f"{path}: cannot write ({err.strerror or err})") from None
    return len(entries)


def load(path: Path) -> Snapshot:
    """Read a gather archive into memory; GatherError (one line, naming the file) if it is bad."""
    try:
        blob = read_local(path, tarball.MAX_ARCHIVE)
    except OSError as err:
        raise GatherError(f"{path}: cannot read ({err.strerror or err})") from None
    files: dict[str, bytes] = {}
    links: dict[str, str] = {}
    dirs: set[str] = set()
    meta_bytes: bytes | None = None
    try:
        for member in tarball.members(tarball.decompress(blob)):
            name = member.name.strip("/")
            if name == META:
                meta_bytes = member.data
                continue
            if name != "host" and not name.startswith("host/"):
                continue
            host_path = "/" + posixpath.normpath(name[4:] or "/").lstrip("/")
            if member.kind == tarball.REGULAR:
                files[host_path] = member.data
            elif member.kind == tarball.LINK:
                links[host_path] = member.linkname
            elif member.kind == tarball.DIRECTORY:
                dirs.add(host_path)
            elif member.kind == tarball.HARDLINK:
                source = "/" + posixpath.normpath(member.linkname.strip("/")[4:] or "/").lstrip("/")
                if source in files:
                    files[host_path] = files[source]
    except tarball.ArchiveError as err:
        raise GatherError(f"{path}: cannot read gather archive: {err}") from None
    if meta_bytes is None:
        raise GatherError(f"{path}: no {META}; not a gpufabric gather archive")
    meta = _meta(path, meta_bytes)
    return Snapshot(meta=meta, tree=MemoryTree(files=files, links=links, dirs=dirs))


def _meta(path: Path, data: bytes) -> dict[str, Any]:
    try:
        meta = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise GatherError(f"{path}: {META} is not valid JSON: {err}") from None
    if not isinstance(meta, dict):
        raise GatherError(f"{path}: {META} is not a JSON object")
    if meta.get("format") != FORMAT:
        raise GatherError(f"{path}: unsupported gather format {meta.get('format')!r}")
    return meta


def unpack(snapshot: Snapshot, into: Path) -> Path:
    """Write an in-memory snapshot's host tree under `into` (links kept inside it); its root."""
    tree = snapshot.tree
    if tree is None:
        return snapshot.root
    root = into / "host"
    root.mkdir(parents=True, exist_ok=True)
    for d in sorted(tree.dirs):
        (root / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for name, data in tree.files.items():
        (root / name.lstrip("/")).write_bytes(data)
    for name, target in tree.links.items():
        if name not in tree.dirs:
            (root / name.lstrip("/")).symlink_to(portable_target(name, target))
    return root


def open_snapshot(path: Path, into: Path) -> Snapshot:
    """Load a gather archive and unpack its host tree under `into` (tests, benchmarks)."""
    snap = load(path)
    return Snapshot(meta=snap.meta, root=unpack(snap, into))
