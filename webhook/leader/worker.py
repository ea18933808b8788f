"""The one copy of a leader's work: a thread running `work(stop)`, stopped and waited for."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

Work = Callable[[threading.Event], None]


class Worker:
    """Runs `work(stop)` on its own thread. `stop()` sets the event and returns once it ended."""

    def __init__(self, name: str, work: Work) -> None:
        self.name = name
        self.stop_event = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(work,), name=name, daemon=True)
        self._thread.start()

    def _run(self, work: Work) -> None:
        try:
            work(self.stop_event)
        except Exception:
            log.exception("leader work failed", extra={"role": self.name})

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, patience: float) -> None:
        """Ask the work to stop and wait for it; complain when it takes longer than `patience`."""
        self.stop_event.set()
        self._thread.join(patience)
        if self._thread.is_alive():
            log.error(
                "leader work did not stop in time; another replica may already lead",
                extra={"role": self.name, "patience_s": patience},
            )
            self._thread.join()
