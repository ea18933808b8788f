"""What `serve` runs, assembled in a `Serving` by one `add_*` function per capability: each adds
its watches, its listeners on the shared GpuNodeStatus and Node feeds, and its leader-elected
worker (one Lease per role), without touching the others' lines.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from common import api
from webhook.fleet.cache import FabricCache
from webhook.groups.admission.spines import FABRIC_PLURAL, SpineSizes
from webhook.groups.extensions.gang.podgroups import Book as PodGroups
from webhook.groups.extensions.imex.inject import ImexState
from webhook.groups.extensions.imex.nodes import DomainSizes
from webhook.kube.watch import Gathered, ListWatch, Obj, Paged, Sink
from webhook.leader import LABELER_LEASE, Elector, Work
from webhook.server.metrics import WebhookMetrics

log = logging.getLogger("webhook")


@dataclass
class Feed:
    """One watch, many consumers: every listener sees every page and event, in order (a Sink:
    lists arrive page by page, see webhook.kube.watch)."""

    sinks: list[Sink] = field(default_factory=list)
    on_event: list[Callable[[str, Obj], None]] = field(default_factory=list)

    def subscribe(self, sink: Sink, on_event: Callable[[str, Obj], None]) -> None:
        self.sinks.append(sink)
        self.on_event.append(on_event)

    def start(self) -> None:
        for s in self.sinks:
            s.start()

    def page(self, items: list[Obj]) -> None:
        for s in self.sinks:
            s.page(items)

    def done(self) -> None:
        for s in self.sinks:
            s.done()

    def event(self, kind: str, obj: Obj) -> None:
        for f in self.on_event:
            f(kind, obj)


def at_end(f: Callable[[], None]) -> Sink:
    """A Sink for a consumer that only needs to know a list is complete."""
    return Paged(lambda: None, lambda items: None, f)


@dataclass
class Serving:
    args: argparse.Namespace
    api_client: Any
    cache: FabricCache
    metrics: WebhookMetrics
    statuses: Feed = field(default_factory=Feed)  # GpuNodeStatus objects
    nodes: Feed = field(default_factory=Feed)  # Nodes, metadata only
    watches: list[ListWatch] = field(default_factory=list)
    elected: dict[str, Work] = field(default_factory=dict)  # Lease name -> work while leading
    on_lead: dict[str, Callable[[bool], None]] = field(default_factory=dict)  # per Lease
    labeler: Any = None  # webhook.labeler.nodes.Labeler when --labeler
    fabric: Any = None  # webhook.fabric.controller.FabricController when --labeler


def name_of(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def node_labels(obj: Obj) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, dict) else {}


def add_cache_watches(s: Serving) -> None:
    """GpuNodeStatus and GpuClaim into the admission cache; Node existence too, so a deleted
    node's status never counts for placement."""
    from webhook.kube.client import STATUS_PAGE, custom_list_watch, node_list_watch

    cache = s.cache

    def on_status_event(kind: str, obj: Obj) -> None:
        if kind == "DELETED":
            cache.delete_node(name_of(obj))
        else:
            cache.put_node(name_of(obj), obj.get("status"))

    def claim_of(obj: Obj) -> tuple[str, str, Obj]:
        return str(obj["metadata"].get("namespace", "default")), name_of(obj), obj.get("spec") or {}

    def on_claim_event(kind: str, obj: Obj) -> None:
        ns = str(obj["metadata"].get("namespace", "default"))
        if kind == "DELETED":
            cache.delete_claim(ns, name_of(obj))
        else:
            cache.put_claim(ns, name_of(obj), obj.get("spec") or {})

    s.statuses.subscribe(
        Paged(
            cache.start_nodes,
            lambda items: cache.page_nodes((name_of(o), o.get("status")) for o in items),
            cache.end_nodes,
        ),
        on_status_event,
    )
    # The Node labels too: a pod's own nodeSelector and affinity narrow the nodes it is decided
    # on (webhook.fleet.selection).
    s.nodes.subscribe(
        Paged(
            cache.start_existing,
            lambda items: cache.page_existing((name_of(o), node_labels(o)) for o in items),
            cache.end_existing,
        ),
        lambda kind, obj: cache.node_exists(name_of(obj), kind != "DELETED", node_labels(obj)),
    )
    s.watches += [
        ListWatch(
            api.NODE_STATUS_PLURAL,
            *custom_list_watch(s.api_client, api.NODE_STATUS_PLURAL, STATUS_PAGE),
            on_list=s.statuses,
            on_event=s.statuses.event,
        ),
        ListWatch(
            api.CLAIM_PLURAL,
            *custom_list_watch(s.api_client, api.CLAIM_PLURAL),
            on_list=Gathered(lambda items: cache.replace_claims(map(claim_of, items))),
            on_event=on_claim_event,
        ),
        ListWatch("nodes", *node_list_watch(s.api_client), s.nodes, s.nodes.event),
    ]


def add_spine_watch(s: Serving, spines: SpineSizes) -> None:
    """The GpuFabric object, for the admission warning about groups larger than any spine."""
    from webhook.kube.client import custom_list_watch

    s.watches.append(
        ListWatch(
            FABRIC_PLURAL,
            *custom_list_watch(s.api_client, FABRIC_PLURAL),
            Gathered(spines.listed),
            spines.event,
        )
    )


def add_imex_watch(s: Serving, state: ImexState, sizes: DomainSizes) -> None:
    """ComputeDomains and NVLink domain sizes for admission
    (webhook.groups.extensions.imex.inject)."""
    from webhook.groups.framework.ownedkube import owned_watch

    s.nodes.subscribe(
        Paged(
            sizes.start,
            lambda items: sizes.page((name_of(o), node_labels(o)) for o in items),
            sizes.done,
        ),
        lambda kind, obj: sizes.event(name_of(obj), kind != "DELETED", node_labels(obj)),
    )
    s.watches.append(owned_watch("computedomains", s.api_client, state.book, lambda f: f()))


def add_gang_watch(s: Serving, book: PodGroups) -> None:
    """Whether the cluster serves PodGroups, for admission
    (webhook.groups.extensions.gang.admit)."""
    from webhook.groups.framework.ownedkube import owned_watch

    s.watches.append(owned_watch("podgroups", s.api_client, book, lambda f: f()))


def add_labeler(s: Serving) -> None:
    """Node labels from the shared feeds; only the holder of Lease gpufabric-labeler writes."""
    from webhook.labeler.kube import KubeNodeApi
    from webhook.labeler.nodes import Labeler

    nodes = KubeNodeApi(s.api_client)
    labeler = Labeler(
        nodes,
        observe=lambda outcome: s.metrics.labeler_applies.labels(outcome=outcome).inc(),
        report=nodes.event,
    )
    s.statuses.subscribe(
        Paged(labeler.statuses_start, labeler.statuses_page, labeler.statuses_done),
        labeler.status_event,
    )
    s.nodes.subscribe(
        Paged(labeler.nodes_start, labeler.nodes_page, labeler.nodes_done), labeler.node_event
    )
    s.elected[LABELER_LEASE] = labeler.work
    s.on_lead[LABELER_LEASE] = lambda leading: s.metrics.labeler_leader.set(1 if leading else 0)
    s.labeler = labeler


def add_network(s: Serving) -> None:
    """Network labels (issue 8): the fabric from ConfigMap gpufabric-topology (or existing node
    labels with --topology-labels) becomes the labeler's extra labels, applied in the same apply as
    the summary labels. The leader also re-derives and publishes GpuFabric `cluster`."""
    from webhook.fabric.controller import CONFIGMAP, FabricController, run
    from webhook.fabric.sources.parts import PART_LABEL
    from webhook.kube.client import configmap_list_watch
    from webhook.labeler.kube import KubeFabricApi

    labeler = s.labeler
    fabric = FabricController(
        getattr(s.args, "topology_labels", None),
        on_fallback=lambda why: s.metrics.reader_fallbacks.labels(reason=why).inc(),
    )
    labeler.extra = fabric.labels_for_node
    s.fabric = fabric
    namespace = os.environ.get("POD_NAMESPACE", api.DEFAULT_NAMESPACE)

    def labels(obj: Obj) -> dict[str, str]:
        return dict(node_labels(obj))

    s.statuses.subscribe(
        Paged(
            fabric.statuses_start,
            lambda items: fabric.statuses_page([(name_of(o), o.get("status")) for o in items]),
            fabric.statuses_done,
        ),
        lambda kind, obj: fabric.status(
            name_of(obj), None if kind == "DELETED" else obj.get("status")
        ),
    )

    def nodes_page(items: list[Obj]) -> None:
        for o in items:
            fabric.node(name_of(o), labels(o))

    s.nodes.subscribe(
        Paged(lambda: None, nodes_page, lambda: None),
        lambda kind, obj: fabric.node(name_of(obj), None if kind == "DELETED" else labels(obj)),
    )

    # The source: ConfigMap gpufabric-topology, and the parts labelled gpufabric.io/topology-part.
    def topology_watch(watch: str, **selector: str) -> ListWatch:
        return ListWatch(
            watch,
            *configmap_list_watch(s.api_client, namespace, **selector),
            on_list=Gathered(lambda items: fabric.configmaps(watch, items)),
            on_event=lambda kind, obj: fabric.configmap_event(watch, kind, obj),
        )

    s.watches += [
        topology_watch("topology-configmap", name=CONFIGMAP),
        topology_watch("topology-parts", label=PART_LABEL),
    ]
    fabrics = KubeFabricApi(s.api_client)
    label_work = s.elected[LABELER_LEASE]

    def work(stop: threading.Event) -> None:
        t = threading.Thread(
            target=run,
            args=(fabric, stop, labeler.resync_all, fabrics.apply),
            name="fabric",
            daemon=True,
        )
        t.start()
        label_work(stop)
        t.join()

    s.elected[LABELER_LEASE] = work


def add_export(s: Serving, targets: tuple[str, ...]) -> Any:
    """The scheduler exports (issue 19) from the labeler's fabric and the shared feeds; the holder
    of Lease gpufabric-labeler writes them beside the labels."""
    from webhook.export.controller import Exporter
    from webhook.export.kinds import KINDS
    from webhook.export.kube import KubeExportApi

    fabric = s.fabric  # add_network subscribed it to the feeds first: it sees each event first
    exporter = Exporter(
        KubeExportApi(s.api_client),
        [KINDS[t] for t in targets],
        fabric.positions,
        fabric.set_condition,
        fabric.nvlink_domains,
    )
    s.statuses.subscribe(at_end(lambda: exporter.listed("statuses")), lambda kind, obj: None)
    s.nodes.subscribe(at_end(lambda: exporter.listed("nodes")), lambda kind, obj: None)
    label_work = s.elected[LABELER_LEASE]

    def work(stop: threading.Event) -> None:
        t = threading.Thread(target=exporter.run, args=(stop,), name="export", daemon=True)
        t.start()
        label_work(stop)
        t.join()

    s.elected[LABELER_LEASE] = work
    return exporter


def add_placer(s: Serving) -> None:
    """The group placer: its own Lease, one copy of the work cluster-wide."""
    from webhook.groups.model.names import PLACER_LEASE
    from webhook.groups.placer.kube import run_placer
    from webhook.server.gauges import gauges_every

    def work(stop: threading.Event) -> None:
        run_placer(s.api_client, stop, s.metrics, gauges_every(s.metrics, 5.0), s.metrics)

    s.elected[PLACER_LEASE] = work
    s.on_lead[PLACER_LEASE] = lambda leading: s.metrics.placer_leader.set(1 if leading else 0)


def start(s: Serving, stop: threading.Event) -> list[threading.Thread]:
    """Start every watch and one elector per Lease; returns the electors' threads (they release
    their Lease when `stop` is set)."""
    from webhook.leader.kube import KubeLeaseApi

    for w in s.watches:
        threading.Thread(target=w.run, args=(stop,), name=w.name, daemon=True).start()
        s.metrics.watch_stale.labels(watch=w.name).set_function(w.stale_seconds)
    namespace = os.environ.get("POD_NAMESPACE", api.DEFAULT_NAMESPACE)
    # Unique per process: a restarted container must not take its predecessor's Lease as its own.
    identity = f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    leases = KubeLeaseApi(s.api_client, namespace)
    threads = []
    for role, work in s.elected.items():

        def changed(leading: bool, role: str = role) -> None:
            s.metrics.leader.labels(lease=role).set(1 if leading else 0)
            hook = s.on_lead.get(role)
            if hook is not None:
                hook(leading)

        elector = Elector(role, identity, leases, work, on_change=changed)
        t = threading.Thread(target=elector.run, args=(stop,), name=f"elect-{role}", daemon=True)
        t.start()
        threads.append(t)
    return threads
