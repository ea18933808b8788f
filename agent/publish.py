"""Where statuses go: the Publisher seam, plus a recording publisher for dry runs and tests."""

from __future__ import annotations

from typing import Any, Protocol


class PublishError(Exception):
    """The API server refused or could not be reached; the caller retries with backoff."""


class Publisher(Protocol):
    def current(self, node: str) -> dict[str, Any] | None:
        """The status the API server holds for this node now (None if the object is missing)."""
        ...

    def apply(self, node: str, status: dict[str, Any]) -> None:
        """Server-side apply the status subresource, creating the object first if it is missing."""
        ...


class RecordingPublisher:
    """Keeps what it was given; `fail_next` makes the next n applies raise like a server outage."""

    def __init__(self) -> None:
        self.applied: list[tuple[str, dict[str, Any]]] = []
        self.stored: dict[str, dict[str, Any]] = {}
        self.fail_next = 0

    def current(self, node: str) -> dict[str, Any] | None:
        return self.stored.get(node)

    def apply(self, node: str, status: dict[str, Any]) -> None:
        if self.fail_next > 0:
            self.fail_next -= 1
            raise PublishError("simulated API server outage (503 Service Unavailable)")
        self.applied.append((node, status))
        self.stored[node] = status
