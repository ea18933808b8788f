"""Which nodes' IMEX channel is taken, from the placer's own state: the pods that claim a channel
template and are bound to a node, or were promised one by the placer and are not bound yet.

A node has one channel (the driver's channel-0 device), and kube-scheduler gives it to one claim
only. NVIDIA's kubelet plugin labels the node with the ComputeDomain's UID only when it prepares
a pod there, and never when IMEX runs as a host service; a group decided before that label comes
would be sent to channels already taken. So the placer counts them itself. A channel is named
`<namespace>/<template>` (the pods name the template; the ComputeDomain's UID may not be known
yet when their record arrives). Pure.
"""

from __future__ import annotations

from collections import Counter


def channel_id(namespace: str, template: str) -> str:
    """The name a channel goes by in the placer's view of the nodes (never written anywhere)."""
    return f"{namespace}/{template}"


class Channels:
    """Pod -> (node, channel) and, per node, the channels its pods hold (one, unless the
    scheduler was given a conflict the placer did not make)."""

    def __init__(self) -> None:
        self.of: dict[str, tuple[str, str]] = {}  # pod uid -> (node, channel)
        self.on: dict[str, Counter[str]] = {}  # node -> channel -> pods of it there
        self.count: Counter[str] = Counter()  # channel -> pods holding it, anywhere

    def put(self, uid: str, node: str, channel: str) -> set[str]:
        """Record where the pod holds its channel ('' for either: nowhere); the nodes whose
        holder may have changed."""
        old = self.of.pop(uid, None)
        touched: set[str] = set()
        if old is not None:
            self.count[old[1]] -= 1
            if self.count[old[1]] <= 0:
                del self.count[old[1]]
            held = self.on[old[0]]
            held[old[1]] -= 1
            if held[old[1]] <= 0:
                del held[old[1]]
            if not held:
                del self.on[old[0]]
            touched.add(old[0])
        if node and channel:
            self.of[uid] = (node, channel)
            self.count[channel] += 1
            self.on.setdefault(node, Counter())[channel] += 1
            touched.add(node)
        return touched

    def holder(self, node: str) -> str:
        """The channel that holds the node ('' for none; the first by name when several do)."""
        held = self.on.get(node)
        return min(held) if held else ""

    def taken(self, channel: str) -> bool:
        """Whether some pod holds the channel, on any node."""
        return channel in self.count

    def reset(self) -> set[str]:
        """Forget every pod (a relist follows); the nodes that had a holder."""
        nodes = set(self.on)
        self.of, self.on, self.count = {}, {}, Counter()
        return nodes
