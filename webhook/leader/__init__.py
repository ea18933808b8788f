"""Leader election: one coordination.k8s.io Lease per role; the holder runs that role's work."""

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
