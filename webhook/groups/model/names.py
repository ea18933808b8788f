"""Names fixed by DESIGN.md "Group placement" and the Kueue names the placer must leave alone."""

from __future__ import annotations

from typing import Final, Literal

ANN_GROUP: Final = "gpufabric.io/group"
ANN_SIZE: Final = "gpufabric.io/group-size"
ANN_LOCALITY: Final = "gpufabric.io/group-locality"
ANN_LEVEL: Final = "gpufabric.io/group-level"
ANN_PLACEMENT: Final = "gpufabric.io/placement"  # written by the placer: "<level>=<domain>"
ANN_RANK: Final = "gpufabric.io/rank"  # written by the placer: 0..size-1 (DESIGN.md "Ranks")
GROUP_ANNOTATIONS: Final = (ANN_GROUP, ANN_SIZE, ANN_LOCALITY, ANN_LEVEL, ANN_PLACEMENT)

GATE: Final = "gpufabric.io/group"
LABEL_GROUP: Final = "gpufabric.io/group"

GroupKey = tuple[str, str]  # (namespace, group name): how every part of the placer keys a group

Level = Literal["nvlink-domain", "leaf", "leaf-pair", "leaf-quad", "spine"]
Locality = Literal["required", "preferred"]
# Bottom -> top. The first is the node's multi-node NVLink domain (GB200/GB300 NVL72): it need not
# nest in the network levels (a domain may span two leaf domains), and most nodes have none.
LEVELS: Final[tuple[Level, ...]] = ("nvlink-domain", "leaf", "leaf-pair", "leaf-quad", "spine")
NVLINK_LEVEL: Final[Level] = "nvlink-domain"
# The network levels nest: each leaf domain sits in one leaf-pair, one leaf-quad, one spine.
NETWORK_LEVELS: Final[tuple[Level, ...]] = LEVELS[1:]
LOCALITIES: Final[tuple[Locality, ...]] = ("required", "preferred")

# Kueue manages pods that carry one of its gates or its queue label; the placer never touches them.
KUEUE_PREFIX: Final = "kueue.x-k8s.io/"
KUEUE_QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"

PLACER_LEASE: Final = "gpufabric-placer"
PLACER_FIELD_MANAGER: Final = "gpufabric-placer"


def level_key(level: str) -> str:
    """The node label that names a node's domain at this level."""
    return f"gpufabric.io/{level}"


def escape_key(key: str) -> str:
    """A map key as one JSON Pointer segment (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def choice(value: object, accepted: tuple[str, ...]) -> str | None:
    """An enumerated annotation value as the webhook reads every one of them (docs/usage.md):
    surrounding whitespace ignored, any case; the accepted spelling, or None."""
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    return text if text in accepted else None
