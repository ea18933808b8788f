"""Pick the format (from the ConfigMap key or file name, else from the content), parse, place."""

from __future__ import annotations

from collections.abc import Callable

import yaml

from common import yamlload
from webhook.fabric.model import Fabric, SourceError
from webhook.fabric.sources import slurm, static
from webhook.fabric.sources.ib import domains, reader
from webhook.fabric.sources.ib.dump import Dump
from webhook.fabric.sources.join import NodeGuids
from webhook.fabric.sources.textchunks import Chunks, head

KEYS = ("ibnetdiscover", "topology.conf", "topology.yaml", "nodes.yaml")  # ConfigMap keys (DESIGN)


def detect(text: str, name: str = "") -> str:
    """One of KEYS, from the key/file name when it says, else from the content."""
    base = name.rsplit("/", 1)[-1]
    if base in KEYS:
        return base
    if reader.looks_like(text):
        return "ibnetdiscover"
    if slurm.looks_like_conf(text):
        return "topology.conf"
    try:
        data = yamlload.load(text)
    except (yaml.YAMLError, RecursionError):
        data = None
    if slurm.looks_like_yaml(data):
        return "topology.yaml"
    if static.looks_like(data):
        return "nodes.yaml"
    raise SourceError(
        "unknown topology format: expected ibnetdiscover output, a Slurm topology.conf or "
        "topology.yaml, or a gpufabric nodes.yaml"
    )


def parse(
    text: str | Chunks, name: str = "", on_fallback: Callable[[str], None] | None = None
) -> Dump | Fabric:
    """The source read: an ibnetdiscover dump as its graph, whose positions wait for the nodes'
    HCA GUIDs (`place`), every other format as its fabric. Given as Chunks, an ibnetdiscover
    dump is parsed as it streams (the other formats are small). `on_fallback`: reader.parse's."""
    if not isinstance(text, str):
        if detect(head(text), name) == "ibnetdiscover":
            return reader.parse(text, on_fallback)
        text = "".join(text())
    fmt = detect(text, name)
    if fmt == "ibnetdiscover":
        return reader.parse(text, on_fallback)
    if fmt == "topology.conf":
        return slurm.parse_conf(text)
    if fmt == "topology.yaml":
        return slurm.parse_yaml(text)
    return static.parse(text)


def place(parsed: Dump | Fabric, nodes: NodeGuids | None = None) -> Fabric:
    """The fabric of a parsed source; `nodes` (node -> HCA GUIDs) joins a dump (None: preview,
    nodes named by NodeDescription). A parsed source is not changed: the labeler keeps one and
    places it again when only the GUIDs change."""
    return parsed if isinstance(parsed, Fabric) else domains.derive(parsed, nodes)


def derive(text: str | Chunks, name: str = "", nodes: NodeGuids | None = None) -> Fabric:
    """The fabric described by `text`: `parse`, then `place`."""
    return place(parse(text, name), nodes)
