"""The exported API kinds by their `--export` / `-o` name: where they live, how they are built."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook.export import kai, kueue, volcano
from webhook.export.model import Model


@dataclass(frozen=True, slots=True)
class Kind:
    target: str  # kueue | kai | volcano
    group: str
    versions: tuple[str, ...]  # preferred first
    kind: str
    plural: str
    objects: Callable[[Model, str], list[dict[str, Any]]]
    replace_on_level_change: bool  # levels are immutable: delete and create again

    @property
    def title(self) -> str:
        return f"{self.kind}.{self.group}"


KINDS = {
    "kueue": Kind(
        "kueue", kueue.GROUP, kueue.VERSIONS, kueue.KIND, kueue.PLURAL, kueue.topologies, True
    ),
    "kai": Kind("kai", kai.GROUP, kai.VERSIONS, kai.KIND, kai.PLURAL, kai.topologies, True),
    "volcano": Kind(
        "volcano",
        volcano.GROUP,
        volcano.VERSIONS,
        volcano.KIND,
        volcano.PLURAL,
        volcano.hypernodes,
        False,
    ),
}


def parse_targets(values: list[str] | None) -> tuple[str, ...]:
    """`--export kueue,kai` (repeatable) -> targets in KINDS order; ValueError names a bad one."""
    asked = {t.strip() for v in values or [] for t in v.split(",") if t.strip()}
    if values and not asked:
        raise ValueError(f"--export: no target given (choose from {', '.join(KINDS)})")
    unknown = sorted(asked - set(KINDS))
    if unknown:
        raise ValueError(
            f"--export: unknown target {unknown[0]!r} (choose from {', '.join(KINDS)})"
        )
    return tuple(t for t in KINDS if t in asked)
