"""Which nodes a member of a group with an IMEX channel may take: none that another
ComputeDomain's channel holds (the driver's node label names its UID), none where a member of the
same group already is (one channel a node). The first as a Selector, so the placer's memoized
eligibility and per-domain tallies serve it like any pod's own constraints; the second is
Member.avoid, which fit.pack honours (a node-name selector would judge every node anew)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from common.api import LABEL_NVLINK_DOMAIN
from webhook.groups.extensions.imex.names import NODE_LABEL
from webhook.groups.model.selector import Selector, selector_of
from webhook.kube.nodeselector import REQUIRED, required_terms


def excluding(selector: Selector, uid: str, channel: str = "") -> Selector:
    """The selector narrowed to nodes without another ComputeDomain's channel: the label absent,
    or naming the group's own ComputeDomain (`uid`, as the driver labels, or `channel`, as the
    placer's view plays the label before: imex/channels.py). Node terms are ORed, so each term
    is split in two."""
    spec: Mapping[str, Any] = selector.spec.get("spec") or {}
    terms = required_terms(selector.spec) or [{}]
    ours = [{"key": NODE_LABEL, "operator": "DoesNotExist"}]
    own = [v for v in (uid, channel) if v]
    choices = [ours] + ([[{"key": NODE_LABEL, "operator": "In", "values": own}]] if own else [])
    narrowed = [
        {**t, "matchExpressions": [*(t.get("matchExpressions") or []), *extra]}
        for t in terms
        for extra in choices
    ]
    affinity = dict(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    node_affinity[REQUIRED] = {"nodeSelectorTerms": narrowed}
    affinity["nodeAffinity"] = node_affinity
    built = selector_of({**spec, "affinity": affinity})
    signature = f"{selector.signature}|{NODE_LABEL}={','.join(own)}"
    return Selector(built.spec, selector.tolerations, signature)


class DomainSizes:
    """Nodes per NVLink domain (the gpufabric.io/nvlink-domain label), for the admission check
    that some domain can hold a `required` group one member a node. Fed by the Node watch."""

    def __init__(self) -> None:
        self.of: dict[str, str] = {}  # node -> its NVLink domain
        self.count: dict[str, int] = {}
        self._listing: dict[str, str] = {}

    def start(self) -> None:
        self._listing = {}

    def page(self, nodes: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        for name, labels in nodes:
            if domain := labels.get(LABEL_NVLINK_DOMAIN):
                self._listing[name] = str(domain)

    def done(self) -> None:
        self.of, self._listing = self._listing, {}
        self.count = dict(Counter(self.of.values()))

    def event(self, name: str, exists: bool, labels: Mapping[str, Any]) -> None:
        old = self.of.pop(name, None)
        if old is not None:
            self.count[old] -= 1
            if not self.count[old]:
                del self.count[old]
        domain = labels.get(LABEL_NVLINK_DOMAIN) if exists else None
        if domain:
            self.of[name] = str(domain)
            self.count[str(domain)] = self.count.get(str(domain), 0) + 1

    def largest(self) -> int:
        return max(self.count.values(), default=0)
