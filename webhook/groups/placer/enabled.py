"""The placer's extensions: the ONE list, in the order every point runs them.

A new extension implements the points it needs (framework/points.py) in its own package and
adds one field here; the placer (placer.py) runs the points and names none of them. serve's
wiring (groups/placer/kube.py run_placer) makes each with its API and metrics, and starts the
watches each names at the Watches point.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from webhook.groups.extensions.gang.place import NativeGang
from webhook.groups.extensions.imex.extension import ImexChannels
from webhook.groups.extensions.partly.bound import PartlyBound
from webhook.groups.extensions.preempt.extension import Preemption


@dataclass(frozen=True, slots=True)
class Extensions:
    """Each point runs them in this order. The defaults have no API: nothing is evicted, no
    ComputeDomain nor PodGroup is served (tests and simulations of plain groups)."""

    preempt: Preemption = field(default_factory=Preemption)  # hides held domains first
    imex: ImexChannels = field(default_factory=ImexChannels)
    gang: NativeGang = field(default_factory=NativeGang)
    partly: PartlyBound = field(default_factory=PartlyBound)  # last: its clock starts at ungating

    def ordered(self) -> tuple[object, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))
