"""Leader election over a coordination.k8s.io Lease, one Lease per role (gpufabric-labeler,
gpufabric-placer): `Elector(role, identity, api, work).run(stop)` runs one `work(stop_event)`
while this replica leads and stops it before another replica could take over."""

from webhook.leader.elector import Clock, Elector, SystemClock, Timing
from webhook.leader.lease import Conflict, Lease, LeaseApi, LeaseError, micro_time
from webhook.leader.worker import Work, Worker

LABELER_LEASE = "gpufabric-labeler"
PLACER_LEASE = "gpufabric-placer"

__all__ = [
    "LABELER_LEASE",
    "PLACER_LEASE",
    "Clock",
    "Conflict",
    "Elector",
    "Lease",
    "LeaseApi",
    "LeaseError",
    "SystemClock",
    "Timing",
    "Work",
    "Worker",
    "micro_time",
]
