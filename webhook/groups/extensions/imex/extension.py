"""IMEX channels as an extension of the placer (framework/points.py): each point it implements,
over the state and the ComputeDomain lifecycle of imex/place.py."""

from __future__ import annotations

from collections.abc import Sequence

from webhook.groups.decision.decision import Request
from webhook.groups.decision.seating import Seat
from webhook.groups.extensions.imex.kube import template_watch
from webhook.groups.extensions.imex.place import Imex, ImexMetrics
from webhook.groups.framework.lifecycle import OwnedApi
from webhook.groups.framework.ownedkube import owned_watch
from webhook.groups.framework.points import Cycle, Feeds, Host, Watch
from webhook.groups.model.records import PodRecord


class ImexChannels(Imex):
    """Groups whose members claim an IMEX channel: one member a node, the ComputeDomain made
    before ungating and deleted after the last member, each node's channel counted as taken."""

    def __init__(self, api: OwnedApi | None = None, metrics: ImexMetrics | None = None) -> None:
        super().__init__(api, metrics)
        self.host: Host | None = None
        self.full = True  # the next sweep looks at every group (after a Pod list)

    def attach(self, host: Host) -> None:
        self.host, self.view = host, host.view  # the channels go into its node labels

    def watches(self, feeds: Feeds) -> Sequence[Watch]:
        """The groups' ComputeDomains, and the channel templates NVIDIA's controller makes (a
        change tries the waiting groups again)."""
        return (
            owned_watch("placer-computedomains", feeds.api_client, self.book, feeds.put),
            template_watch(
                "placer-templates", feeds.api_client, self.templates, feeds.put, feeds.changed
            ),
        )

    # -- inputs ----------------------------------------------------------------------------------
    def relisting(self) -> None:
        self.reset()  # the channels taken: from the listed pods again
        self.full = True  # and a group the list left out is gone

    def seen(self, rec: PodRecord) -> None:
        self.track(rec)  # the channel it holds or was promised, if any

    def gone(self, uid: str) -> None:
        self.forget(uid)

    def synced(self) -> None:
        self.pods_listed = True  # from now on a group without pods is gone

    def tick(self) -> None:
        if self.host is not None and self.pods_listed:  # ComputeDomains of gone groups
            self.sweep(self.host.groups, None if self.full else self.host.changed)
            self.full = False

    # -- one group's decision ------------------------------------------------------------------
    def adjust(self, cycle: Cycle, request: Request) -> Request | str:
        return self.request_for(cycle.key, request, cycle.recs)

    def permit(self, cycle: Cycle) -> str:
        return self.judge(cycle.key, cycle.recs)

    def incomplete(self, cycle: Cycle) -> None:
        self.early(cycle.key, cycle.recs, cycle.writes.add)

    def prebind(self, cycle: Cycle) -> str:
        return self.made(cycle.key, cycle.recs, cycle.writes.add)

    def reserve(self, rec: PodRecord, node: str) -> None:
        self.track(rec, node)  # its channel is taken

    def unreserve(self, rec: PodRecord) -> None:
        self.track(rec)  # as it was: no channel promised

    def fits(self, rec: PodRecord, node: str) -> bool:
        return self.channel_free(rec, node)

    def words(self, cycle: Cycle, seats: Sequence[Seat]) -> str:
        return self.placed_words(cycle.key, [s.node for s in seats], self.view.where)
