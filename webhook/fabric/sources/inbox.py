"""The topology ConfigMaps two watches see (the one named `gpufabric-topology`, and those labelled
`gpufabric.io/topology-part`), merged by name: a ConfigMap both see counts once, in the version
that came last, and stays while either watch still has it (the label watch drops it when its
label goes; the named watch keeps it as part 0). Not thread-safe: the controller holds its lock.
"""

from __future__ import annotations

from webhook.fabric.sources.parts import Part


class Inbox:
    def __init__(self) -> None:
        self._parts: dict[str, Part] = {}
        self._seen: dict[str, set[str]] = {}  # name -> the watches that have it

    def listed(self, watch: str, found: list[tuple[str, Part | None]]) -> bool:
        """A watch's list (name, part or None when not a part); True when the parts changed."""
        changed = False
        names = {name for name, part in found if part is not None}
        for name in [n for n, seen in self._seen.items() if watch in seen and n not in names]:
            changed |= self._drop(watch, name)
        for name, part in found:
            changed |= self.event(watch, name, part)
        return changed

    def event(self, watch: str, name: str, part: Part | None) -> bool:
        """One object now (None: gone from that watch); True when the parts changed."""
        if part is None:
            return self._drop(watch, name)
        self._seen.setdefault(name, set()).add(watch)
        if self._parts.get(name) == part:
            return False
        self._parts[name] = part
        return True

    def _drop(self, watch: str, name: str) -> bool:
        seen = self._seen.get(name)
        if seen is None or watch not in seen:
            return False
        seen.discard(watch)
        if seen:
            return False
        del self._seen[name]
        del self._parts[name]
        return True

    def parts(self) -> list[Part]:
        return list(self._parts.values())

    def topology_keys(self) -> set[str]:
        """The topology keys the parts hold (e.g. `ibnetdiscover`, whether or not as `.gz`)."""
        return {k for p in self._parts.values() for k in p.topology_keys()}
