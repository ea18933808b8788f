"""The gather format: a tar.gz of exactly the host files the probes read plus an NVML snapshot.

Layout: `gather.json` (format, node, NVML snapshot, probe options, provenance) and `host/...`
(files, directories and symlinks exactly as read, symlink targets unchanged). `probe --from`
unpacks it and runs the same probes against it, so it reproduces the status on any machine.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.host import Recording

FORMAT = 1
META = "gather.json"


class GatherError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Snapshot:
    root: Path  # the unpacked host root
    meta: dict[str, Any]
    holder: tempfile.TemporaryDirectory[str] | None = None

    @property
    def nvml(self) -> dict[str, Any]:
        return dict(self.meta.get("nvml") or {"error": {"reason": "NotGathered", "message": ""}})

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.meta.get("options") or {})

    def close(self) -> None:
        if self.holder is not None:
            self.holder.cleanup()


def _info(name: str, kind: bytes, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = size
    info.linkname = link
    info.mtime = 0
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o777 if kind == tarfile.SYMTYPE else 0o644
    return info


def write(path: Path, recording: Recording, meta: dict[str, Any]) -> int:
    """Write the archive deterministically (sorted, zero mtimes); returns the number of entries."""
    body = dict(meta, format=FORMAT)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        data = json.dumps(body, indent=2, sort_keys=True).encode()
        tar.addfile(_info(META, tarfile.REGTYPE, len(data)), io.BytesIO(data))
        entries: dict[str, tuple[bytes, str, bytes]] = {}
        for d in recording.dirs:
            entries.setdefault(d, (tarfile.DIRTYPE, "", b""))
        for link, target in recording.links.items():
            entries[link] = (tarfile.SYMTYPE, target, b"")
        for name, content in recording.files.items():
            entries[name] = (tarfile.REGTYPE, "", content)
        for name in sorted(entries):
            kind, target, content = entries[name]
            member = "host" + name if name != "/" else "host"
            tar.addfile(_info(member, kind, len(content), target), io.BytesIO(content))
    with path.open("wb") as fh, gzip.GzipFile(filename="", fileobj=fh, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return len(entries)


def open_snapshot(path: Path, into: Path | None = None) -> Snapshot:
    """Unpack a gather archive (into a temporary directory unless `into` is given)."""
    holder = None if into is not None else tempfile.TemporaryDirectory(prefix="gpufabric-")
    dest = into if into is not None else Path(holder.name)  # type: ignore[union-attr]
    try:
        with tarfile.open(path, "r:*") as tar:
            member = tar.extractfile(META)
            if member is None:
                raise GatherError(f"{path}: no {META}; not a gpufabric gather archive")
            meta = json.loads(member.read())
            tar.extractall(dest, filter="data")
    except (tarfile.TarError, OSError, json.JSONDecodeError, KeyError, GatherError) as err:
        if holder is not None:
            holder.cleanup()
        if isinstance(err, GatherError):
            raise
        raise GatherError(f"{path}: cannot read gather archive: {err}") from err
    if meta.get("format") != FORMAT:
        if holder is not None:
            holder.cleanup()
        raise GatherError(f"{path}: unsupported gather format {meta.get('format')!r}")
    (dest / "host").mkdir(exist_ok=True)
    return Snapshot(root=dest / "host", meta=meta, holder=holder)
