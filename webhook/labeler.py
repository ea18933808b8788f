"""GpuNodeStatus events -> node labels, by server-side apply with field manager gpufabric-labeler.

Applying exactly the wanted set under our own field manager removes labels we set earlier and no
longer want, and leaves everybody else's labels alone. Nothing is sent when the node already
carries exactly the wanted gpufabric.io labels.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from common import api
from common.labels import labels_for
from common.model import NodeStatus
from common.wire import WireError

log = logging.getLogger(__name__)


class NodeApi(Protocol):
    def node_labels(self, name: str) -> Mapping[str, str] | None:
        """Current labels of the node (None if the node does not exist)."""
        ...

    def apply_labels(self, name: str, labels: Mapping[str, str]) -> None:
        """SSA metadata.labels on the Node as gpufabric-labeler (force)."""
        ...


def wanted_labels(status: Mapping[str, Any] | None) -> dict[str, str]:
    if not status:
        return {}
    return labels_for(NodeStatus.from_dict(status).summary)


def ours(labels: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k.startswith(api.LABEL_PREFIX)}


class Labeler:
    def __init__(self, nodes: NodeApi) -> None:
        self.nodes = nodes

    def sync(self, name: str, status: Mapping[str, Any] | None) -> str:
        """Make the node's gpufabric labels match the status (None: the status was deleted)."""
        try:
            want = wanted_labels(status)
        except (WireError, ValueError) as err:
            log.warning(
                "unreadable GpuNodeStatus; labels left as they are",
                extra={"node": name, "error": str(err)},
            )
            return self._done(name, "skipped")
        current = self.nodes.node_labels(name)
        if current is None:
            return self._done(name, "no-node")
        if ours(current) == want:
            return self._done(name, "unchanged")
        self.nodes.apply_labels(name, want)
        return self._done(name, "removed" if not want else "applied")

    def handle(self, event: Mapping[str, Any]) -> str:
        """One watch event of GpuNodeStatus: ADDED, MODIFIED, DELETED (BOOKMARK/ERROR ignored)."""
        kind = event.get("type")
        obj = event.get("object") or {}
        name = (obj.get("metadata") or {}).get("name")
        if kind not in ("ADDED", "MODIFIED", "DELETED") or not name:
            return "ignored"
        return self.sync(str(name), None if kind == "DELETED" else obj.get("status"))

    def _done(self, name: str, outcome: str) -> str:
        if outcome in ("applied", "removed"):
            log.info("node labels", extra={"node": name, "outcome": outcome})
        return outcome
