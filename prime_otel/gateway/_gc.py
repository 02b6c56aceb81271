"""The gateway process's garbage collection: what it allocates by the million is decoded records, acyclic JSON
trees freed by reference counting the moment a delivery is done, yet every collection pass walks them while they
live. With Python's default thresholds a full collection (every object in the process) ran every few hundred
episodes, and collecting took about 40 % of the gateway's CPU under load (``benchmarks/bench_gateway.py``).

So, from the moment the gateway is up: what startup built (modules, the app, the servers) is frozen out of every
pass; young passes run every ``YOUNG_THRESHOLD`` net allocations (not 700), so a record mostly dies before its first
pass; and a full pass runs on a clock (``FULL_COLLECTION_SECONDS``) instead of after a count of young passes, which
is what reclaims cyclic garbage that lived long enough to grow old (a closed run's objects, for one).
"""

from __future__ import annotations

import gc
import logging
import threading
import time

_logger = logging.getLogger(__name__)

#: Net allocations of tracked objects between young passes (Python's default: 700).
YOUNG_THRESHOLD = 10_000
#: Young passes between middle-generation passes (default 10).
MIDDLE_THRESHOLD = 50
#: Middle passes that would start a full pass: high enough that only the clock does.
OLD_THRESHOLD = 1_000_000
#: Seconds between full passes.
FULL_COLLECTION_SECONDS = 30.0


class CollectionPolicy:
    """Applies the policy above for the life of the gateway (``start`` once it is built, ``stop`` at shutdown)."""

    def __init__(self, full_collection_seconds: float = FULL_COLLECTION_SECONDS) -> None:
        self._interval = full_collection_seconds
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous = gc.get_threshold()

    def start(self) -> None:
        if self._thread is not None:
            return
        gc.collect()
        gc.freeze()
        self._previous = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
        self._thread = threading.Thread(target=self._collect_forever, name="prime-otel-gateway-gc", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stopped.set()
        self._thread.join(5.0)
        self._thread = None
        gc.set_threshold(*self._previous)
        gc.unfreeze()

    def _collect_forever(self) -> None:
        while not self._stopped.wait(self._interval):
            began = time.monotonic()
            found = gc.collect()
            _logger.debug("full collection: %d unreachable objects in %.3f s", found, time.monotonic() - began)
