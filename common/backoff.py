"""Exponential backoff with jitter, capped: the delay never exceeds `cap`, so a retry loop probes
a recovered server within `cap` seconds (the webhook's watches rely on that bound)."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    base: float = 1.0
    cap: float = 120.0

    def delay(self, failures: int, rng: random.Random) -> float:
        raw = min(self.cap, self.base * 2 ** max(0, failures - 1))
        return float(min(self.cap, raw * rng.uniform(0.5, 1.5)))
