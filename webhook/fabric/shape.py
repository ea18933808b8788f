"""The GpuFabric `status`: one definition that its writer (render.status) and every reader
(groups/admission/spines.py, tests, the e2e tier) use, so the two cannot drift apart again (issue
36: the object shrank to per-spine counts and its reader went on iterating `spines[].leaves` as a
list, failing on every event). Field names and types are those of
daemonset/base/crds/gpufabrics.yaml; `conditions` are the controller's (standard Condition objects)
and are not read here.

from_json reads what the API server returns and raises ShapeError naming the field that has
another shape (an object written by another version), never a TypeError deep in a reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


class ShapeError(ValueError):
    """The object is not a GpuFabric status of this shape: which field, what it was."""


@dataclass(frozen=True, slots=True)
class Summary:
    spines: int
    leaves: int  # leaf domains with nodes
    nodes: int  # placed nodes
    unplaced: int
    problems: int
    nvlink_domains: int | None = None  # where NVLink domains are known
    nvlink_spanning: int | None = None  # of them, spanning more than one leaf domain
    nvlink_unknown: int | None = None  # nodes whose NVLink domain could not be told


@dataclass(frozen=True, slots=True)
class SpineCounts:
    """One spine domain, counted (never its nodes: the object stays small at any size)."""

    name: str
    leaves: int  # leaf domains with nodes
    pairs: int
    quads: int
    nodes: int
    switches: int | None = None  # spine switches, where the source names them
    nvlink_domains: int | None = None  # NVLink domains inside it, where known


@dataclass(frozen=True, slots=True)
class NodeReason:
    node: str
    reason: str


@dataclass(frozen=True, slots=True)
class LeafShare:
    name: str  # a leaf domain
    nodes: int  # of the NVLink domain's nodes in it


@dataclass(frozen=True, slots=True)
class SpanningDomain:
    """An NVLink domain whose nodes sit in more than one leaf domain."""

    name: str
    leaves: tuple[LeafShare, ...]
    nodes: int


@dataclass(frozen=True, slots=True)
class FabricStatus:
    source: str
    summary: Summary
    spines: tuple[SpineCounts, ...] = ()
    unplaced: tuple[NodeReason, ...] = ()
    problems: tuple[str, ...] = ()
    tiers: tuple[int, ...] = ()  # switches per tier, leaves first, where the source says
    nvlink_domains: tuple[SpanningDomain, ...] = ()  # only those spanning leaf domains
    nvlink_unknown: tuple[NodeReason, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The status body as the CRD has it (keys left out where the source says nothing)."""
        out: dict[str, Any] = {"source": self.source, "summary": _summary(self.summary)}
        if self.tiers:
            out["tiers"] = list(self.tiers)
        out["spines"] = [_spine(s) for s in self.spines]
        out["unplaced"] = [{"node": u.node, "reason": u.reason} for u in self.unplaced]
        out["problems"] = list(self.problems)
        if self.nvlink_domains:
            out["nvlinkDomains"] = [
                {
                    "name": d.name,
                    "leaves": [{"name": leaf.name, "nodes": leaf.nodes} for leaf in d.leaves],
                    "nodes": d.nodes,
                }
                for d in self.nvlink_domains
            ]
        if self.nvlink_unknown:
            out["nvlinkUnknown"] = [
                {"node": u.node, "reason": u.reason} for u in self.nvlink_unknown
            ]
        return out

    @classmethod
    def from_json(cls, status: object) -> FabricStatus:
        """The status of a GpuFabric object as the API server returns it."""
        st = _object(status, "status")
        summary = _object(st.get("summary", {}), "status.summary")
        return cls(
            source=_str(st.get("source", ""), "status.source"),
            summary=Summary(
                spines=_int(summary.get("spines", 0), "status.summary.spines"),
                leaves=_int(summary.get("leaves", 0), "status.summary.leaves"),
                nodes=_int(summary.get("nodes", 0), "status.summary.nodes"),
                unplaced=_int(summary.get("unplaced", 0), "status.summary.unplaced"),
                problems=_int(summary.get("problems", 0), "status.summary.problems"),
                nvlink_domains=_opt(summary, "nvlinkDomains", "status.summary"),
                nvlink_spanning=_opt(summary, "nvlinkSpanning", "status.summary"),
                nvlink_unknown=_opt(summary, "nvlinkUnknown", "status.summary"),
            ),
            spines=tuple(
                _spine_of(_object(s, f"status.spines[{i}]"), f"status.spines[{i}]")
                for i, s in enumerate(_list(st.get("spines", []), "status.spines"))
            ),
            unplaced=_reasons(st.get("unplaced", []), "status.unplaced"),
            problems=tuple(
                _str(p, f"status.problems[{i}]")
                for i, p in enumerate(_list(st.get("problems", []), "status.problems"))
            ),
            tiers=tuple(
                _int(t, f"status.tiers[{i}]")
                for i, t in enumerate(_list(st.get("tiers", []), "status.tiers"))
            ),
            nvlink_domains=tuple(
                _spanning(_object(d, f"status.nvlinkDomains[{i}]"), f"status.nvlinkDomains[{i}]")
                for i, d in enumerate(_list(st.get("nvlinkDomains", []), "status.nvlinkDomains"))
            ),
            nvlink_unknown=_reasons(st.get("nvlinkUnknown", []), "status.nvlinkUnknown"),
        )


def _summary(s: Summary) -> dict[str, Any]:
    out: dict[str, Any] = {
        "spines": s.spines,
        "leaves": s.leaves,
        "nodes": s.nodes,
        "unplaced": s.unplaced,
        "problems": s.problems,
    }
    if s.nvlink_domains is not None:
        out["nvlinkDomains"] = s.nvlink_domains
    if s.nvlink_spanning is not None:
        out["nvlinkSpanning"] = s.nvlink_spanning
    if s.nvlink_unknown is not None:
        out["nvlinkUnknown"] = s.nvlink_unknown
    return out


def _spine(s: SpineCounts) -> dict[str, Any]:
    out: dict[str, Any] = {"name": s.name}
    if s.switches is not None:
        out["switches"] = s.switches
    out |= {"leaves": s.leaves, "pairs": s.pairs, "quads": s.quads, "nodes": s.nodes}
    if s.nvlink_domains is not None:
        out["nvlinkDomains"] = s.nvlink_domains
    return out


def _spine_of(s: Mapping[str, Any], at: str) -> SpineCounts:
    return SpineCounts(
        name=_str(s.get("name"), f"{at}.name"),
        leaves=_int(s.get("leaves", 0), f"{at}.leaves"),
        pairs=_int(s.get("pairs", 0), f"{at}.pairs"),
        quads=_int(s.get("quads", 0), f"{at}.quads"),
        nodes=_int(s.get("nodes", 0), f"{at}.nodes"),
        switches=_opt(s, "switches", at),
        nvlink_domains=_opt(s, "nvlinkDomains", at),
    )


def _spanning(d: Mapping[str, Any], at: str) -> SpanningDomain:
    leaves = []
    for i, leaf in enumerate(_list(d.get("leaves", []), f"{at}.leaves")):
        entry = _object(leaf, f"{at}.leaves[{i}]")
        leaves.append(
            LeafShare(
                _str(entry.get("name"), f"{at}.leaves[{i}].name"),
                _int(entry.get("nodes", 0), f"{at}.leaves[{i}].nodes"),
            )
        )
    return SpanningDomain(
        _str(d.get("name"), f"{at}.name"), tuple(leaves), _int(d.get("nodes", 0), f"{at}.nodes")
    )


def _reasons(value: object, at: str) -> tuple[NodeReason, ...]:
    out = []
    for i, item in enumerate(_list(value, at)):
        entry = _object(item, f"{at}[{i}]")
        out.append(
            NodeReason(
                _str(entry.get("node"), f"{at}[{i}].node"),
                _str(entry.get("reason"), f"{at}[{i}].reason"),
            )
        )
    return tuple(out)


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _object(value: object, at: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ShapeError(f"{at}: expected an object, got {_kind(value)}")
    return value


def _list(value: object, at: str) -> list[Any]:
    if not isinstance(value, list):
        raise ShapeError(f"{at}: expected a list, got {_kind(value)}")
    return value


def _str(value: object, at: str) -> str:
    if not isinstance(value, str):
        raise ShapeError(f"{at}: expected a string, got {_kind(value)}")
    return value


def _int(value: object, at: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ShapeError(f"{at}: expected an integer, got {_kind(value)}")
    return value


def _opt(obj: Mapping[str, Any], key: str, at: str) -> int | None:
    return None if obj.get(key) is None else _int(obj[key], f"{at}.{key}")
