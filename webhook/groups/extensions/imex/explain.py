"""explain's words on a group with an IMEX channel: its ComputeDomain and template, and which
NVLink domains could hold it one member a node. The nodes whose channel is taken are counted as the
placer counts them (imex/channels.py, through Imex.track): from the bound pods given that claim
a group's channel, beside the driver's node label (which comes late, or never with IMEX as a host
service). Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from webhook.groups.decision.capacity import CapacityView
from webhook.groups.decision.choose import candidates
from webhook.groups.decision.decision import Request
from webhook.groups.extensions.imex.channels import channel_id
from webhook.groups.extensions.imex.names import template_name
from webhook.groups.extensions.imex.nodes import excluding
from webhook.groups.extensions.imex.place import Imex, mode_of
from webhook.groups.model.names import NVLINK_LEVEL
from webhook.groups.model.records import pod_record


def domain_lines(
    pod: Mapping[str, Any],
    view: CapacityView,
    request: Request,
    pods: Iterable[Mapping[str, Any]] = (),
) -> tuple[Request, list[str]] | None:
    """The request as the placer adjusts it and the lines; None when the pod asks no channel.
    `pods`: the Pods given with the nodes (their channels go into `view`'s node labels)."""
    meta = pod.get("metadata") or {}
    mode = mode_of(meta.get("annotations") or {})
    if mode is None:
        return None
    taken(view, pods)
    own = channel_id(str(meta.get("namespace") or "default"), template_name(request.name))
    members = tuple(
        replace(m, whole=True, selector=excluding(m.selector, "", own)) for m in request.members
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


def taken(view: CapacityView, pods: Iterable[Mapping[str, Any]]) -> None:
    """The channels the bound pods hold, played into the view's node labels as the placer's
    own bookkeeping plays them (no ComputeDomain is listed here: a user's ComputeDomain's
    channel counts once the driver has labelled its nodes)."""
    imex = Imex()
    imex.view = view
    for obj in pods:
        rec = pod_record(obj, 0.0)
        if rec.holds and rec.templates:
            imex.track(rec)
