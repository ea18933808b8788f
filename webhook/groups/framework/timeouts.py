"""How long the placer waits on the API server: one set of numbers for its pod writes
(groups/placer/kube.py) and the PodGroups and ComputeDomains it owns (framework/ownedkube.py)."""

from __future__ import annotations

TIMEOUT = 10  # seconds for a read or a create
# A demoted leader has lease - renew deadline = 5 s to stop its work (webhook/leader): a write in
# flight and the wait for the next message must both fit in that, so neither can outlast a stop.
WRITE_TIMEOUT = 2
RECHECK = 60.0  # seconds between two questions whether a kind is served, while it is not
