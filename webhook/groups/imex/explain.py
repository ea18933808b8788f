"""explain's words on a group with an IMEX channel: its ComputeDomain and template, and which
NVLink domains could hold it one member a node. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from webhook.groups.capacity import CapacityView
from webhook.groups.choose import candidates
from webhook.groups.decision import Request
from webhook.groups.imex.names import template_name
from webhook.groups.imex.nodes import excluding
from webhook.groups.imex.place import mode_of
from webhook.groups.names import NVLINK_LEVEL


def domain_lines(
    pod: Mapping[str, Any], view: CapacityView, request: Request
) -> tuple[Request, list[str]] | None:
    """The request as the placer adjusts it and the lines; None when the pod asks no channel."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    mode = mode_of(annotations)
    if mode is None:
        return None
    members = tuple(
        replace(m, whole=True, selector=excluding(m.selector, "")) for m in request.members
    )
    adjusted = replace(request, members=members, level=NVLINK_LEVEL, locality=mode)
    lines = [
        f"  IMEX channel ({mode}): ComputeDomain {request.name}, template "
        f"{template_name(request.name)}; one member a node, none on a node of another "
        "ComputeDomain"
    ]
    if NVLINK_LEVEL not in view.levels():
        return adjusted, [*lines, f"  no node carries gpufabric.io/{NVLINK_LEVEL}"]
    found = candidates(view, members, NVLINK_LEVEL)
    fits = [c.domain for c in found if c.fits]
    shown = ", ".join(fits[:8]) + (f", ... {len(fits) - 8} more" if len(fits) > 8 else "")
    lines.append(
        f"  NVLink domains that hold it one member a node now: {len(fits)} of {len(found)}"
        + (f" ({shown})" if fits else "")
    )
    return adjusted, lines
