"""A Node's labels as the placer keeps them: the hostname apart, every other label in one dict
shared by the nodes that carry the same set (a pool's nodes differ only in their hostname), so
65,536 Nodes with ~25 labels keep a few thousand dicts instead of one each (~0.8 KB a node)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

HOSTNAME = "kubernetes.io/hostname"
_SETS: dict[tuple[str, ...], dict[str, str]] = {}
SETS_KEPT = 4096  # distinct label sets remembered; past this the table starts again


class NodeLabels(Mapping[str, str]):
    """Read-only; equal to the dict of the same labels. `get` answers the hostname first (the
    placer's selectors read labels with `get` only)."""

    __slots__ = ("_host", "_rest")

    def __init__(self, labels: Mapping[str, str]) -> None:
        rest = dict(labels)
        self._host = rest.pop(HOSTNAME, None)
        if len(_SETS) >= SETS_KEPT:
            _SETS.clear()  # only sharing is lost: the dicts already handed out stay valid
        key = tuple(x for item in sorted(rest.items()) for x in item)
        self._rest = _SETS.setdefault(key, rest)  # never changed in place, so sharing is safe

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        if key == HOSTNAME and self._host is not None:
            return self._host
        return self._rest.get(key, default)

    def __getitem__(self, key: str) -> str:
        if key == HOSTNAME and self._host is not None:
            return self._host
        return self._rest[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._rest
        if self._host is not None:
            yield HOSTNAME

    def __len__(self) -> int:
        return len(self._rest) + (self._host is not None)

    def __contains__(self, key: object) -> bool:
        return (key == HOSTNAME and self._host is not None) or key in self._rest

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NodeLabels):
            return self._host == other._host and self._rest == other._rest
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]  # like a dict

    def __repr__(self) -> str:
        return repr(dict(self.items()))
