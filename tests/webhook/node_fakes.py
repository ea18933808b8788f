"""Nodes as kube-apiserver keeps them for server-side apply of labels (reference/k8s-wire/nodes/):
one field manager's apply replaces exactly the labels it owned; an identical re-apply changes
nothing (same resourceVersion, no watch event); an apply to a missing Node is 403 for the
labeler (it would be a create); an invalid value is 422. Changes are queued as watch events of a
metadata-only Node watch (PartialObjectMetadata: metadata with labels and managedFields)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from common import api
from webhook.labeler.nodes import LabelRejected, NodeGone

_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_uids = itertools.count(1)


@dataclass
class FakeNode:
    labels: dict[str, str]
    owned: set[str] = field(default_factory=set)  # keys gpufabric-labeler owns
    uid: str = field(default_factory=lambda: f"uid-{next(_uids)}")


class NodeServer:
    def __init__(self, nodes: Mapping[str, Mapping[str, str]]) -> None:
        self.nodes = {n: FakeNode(dict(labels)) for n, labels in nodes.items()}
        self.rv = 100
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.requests: list[tuple[str, dict[str, str]]] = []  # every apply sent
        self.fail = 0  # next n applies fail like an unreachable server

    # -- NodeApi -----------------------------------------------------------------------------
    def apply_labels(self, name: str, labels: Mapping[str, str]) -> None:
        self.requests.append((name, dict(labels)))
        if self.fail > 0:
            self.fail -= 1
            raise ConnectionRefusedError("connection refused")
        node = self.nodes.get(name)
        if node is None:  # the 403 of a create, which KubeNodeApi finds is a node gone
            raise NodeGone(name)
        for value in labels.values():
            if len(value) > 63 or not _VALUE.match(value):
                raise LabelRejected(f'Node "{name}" is invalid: metadata.labels: Invalid value')
        before = dict(node.labels), set(node.owned)
        for key in node.owned - set(labels):
            node.labels.pop(key, None)
        node.labels.update(labels)
        node.owned = set(labels)
        if (node.labels, node.owned) != before:
            self._event("MODIFIED", name)

    # -- what other actors do ----------------------------------------------------------------
    def label(self, name: str, key: str, value: str | None) -> None:
        """`kubectl label` (another manager): ownership of the key leaves us."""
        node = self.nodes[name]
        if value is None:
            node.labels.pop(key, None)
        else:
            node.labels[key] = value
        node.owned.discard(key)
        self._event("MODIFIED", name)

    def touch(self, name: str) -> None:
        """An unrelated change (kubelet annotation, condition): a MODIFIED event, same labels."""
        self._event("MODIFIED", name)

    def delete(self, name: str) -> None:
        self._event("DELETED", name)
        del self.nodes[name]

    def create(self, name: str, labels: Mapping[str, str]) -> None:
        self.nodes[name] = FakeNode(dict(labels))
        self._event("ADDED", name)

    def obj(self, name: str) -> dict[str, Any]:
        node = self.nodes[name]
        meta: dict[str, Any] = {
            "name": name,
            "uid": node.uid,
            "resourceVersion": str(self.rv),
            "labels": dict(node.labels),
            "managedFields": [],
        }
        if node.owned:
            meta["managedFields"].append(
                {
                    "manager": api.LABELER_FIELD_MANAGER,
                    "operation": "Apply",
                    "apiVersion": "v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in node.owned}}},
                }
            )
        return {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": meta}

    def list_objects(self) -> list[dict[str, Any]]:
        return [self.obj(n) for n in self.nodes]

    def _event(self, kind: str, name: str) -> None:
        self.rv += 1
        self.events.append((kind, self.obj(name)))

    def pop_events(self) -> list[tuple[str, dict[str, Any]]]:
        out, self.events = self.events, []
        return out
