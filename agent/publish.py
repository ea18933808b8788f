"""Where statuses go: the Publisher seam, plus a recording publisher for dry runs and tests."""

from __future__ import annotations

from typing import Any, Protocol


class PublishError(Exception):
    """The API server refused or could not be reached; the caller retries with backoff."""


class Publisher(Protocol):
    def current(self, node: str) -> dict[str, Any] | None:
        """The status the API server holds for this node now (None if the object is missing)."""
        ...

    def owner_of(self, node: str) -> str | None:
        """The uid of the Node the published object names as its owner (None: none, no object)."""
        ...

    def node_uid(self, node: str) -> str | None:
        """The Node's uid; None when the Node does not exist (404)."""
        ...

    def apply(self, node: str, status: dict[str, Any], owner: str | None = None) -> None:
        """Server-side apply the status subresource, creating the object first if it is missing.
        `owner` (the Node's uid) becomes the object's ownerReference, so the garbage collector
        removes the status together with its Node."""
        ...


class RecordingPublisher:
    """Keeps what it was given; `fail_next` makes the next n applies raise like a server outage."""

    def __init__(self) -> None:
        self.applied: list[tuple[str, dict[str, Any]]] = []
        self.stored: dict[str, dict[str, Any]] = {}
        self.owners: dict[str, str | None] = {}
        self.node_uids: dict[str, str | None] = {}  # unset: the Node exists, uid "uid-<node>"
        self.fail_next = 0

    def current(self, node: str) -> dict[str, Any] | None:
        return self.stored.get(node)

    def owner_of(self, node: str) -> str | None:
        return self.owners.get(node) if node in self.stored else None

    def node_uid(self, node: str) -> str | None:
        return self.node_uids.get(node, f"uid-{node}")

    def apply(self, node: str, status: dict[str, Any], owner: str | None = None) -> None:
        if self.fail_next > 0:
            self.fail_next -= 1
            raise PublishError("simulated API server outage (503 Service Unavailable)")
        self.applied.append((node, status))
        self.stored[node] = status
        if owner is not None or node not in self.owners:
            self.owners[node] = owner

    def collect(self, node: str) -> None:
        """The garbage collector deletes the status because its owner Node is gone."""
        self.stored.pop(node, None)
        self.owners.pop(node, None)
