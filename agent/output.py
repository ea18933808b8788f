"""Render a probe result for people and machines: json, yaml, table, labels."""

from __future__ import annotations

import json
from typing import Any

from agent.assemble import Assembled
from agent.cli import FORMATS
from common import api
from common.labels import labels_for


def status_object(node: str, result: Assembled) -> dict[str, Any]:
    """The full GpuNodeStatus object, as `kubectl get -o yaml` would show it."""
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.NODE_STATUS_KIND,
        "metadata": {"name": node},
        "status": result.status.to_dict(),
    }


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def render_as(fmt: str, node: str, result: Assembled) -> str:
    if fmt == "json":
        return json.dumps(status_object(node, result), indent=2, sort_keys=True) + "\n"
    if fmt == "yaml":
        import yaml  # only this format needs it (a process that prints JSON starts faster)

        return yaml.safe_dump(status_object(node, result), sort_keys=True)
    if fmt == "table":
        from agent.table import render

        return render(result)
    if fmt == "labels":
        labels = labels_for(result.status.summary)
        return "".join(f"{k}={v}\n" for k, v in sorted(labels.items()))
    raise ValueError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")
