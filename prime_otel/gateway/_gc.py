"""The gateway process's garbage collection. What it allocates by the million is decoded records: acyclic JSON
trees, freed by reference counting the moment their delivery is done, yet every collection pass walks them while
they live. With Python's default thresholds a full pass (every object in the process) ran every few hundred
episodes under load, and collecting took about a third of the gateway's CPU (``benchmarks/bench_gateway.py``).

So, from the moment the gateway is up, what startup built (modules, the app, the servers) is frozen out of every
pass, and passes are not counted in allocations but run on a clock: a full pass every ``FULL_COLLECTION_SECONDS``,
or sooner once the process holds ``GROWTH_LIMIT`` more tracked objects than after the last pass. That reclaims the
little cyclic garbage there is (a closed run's objects, an exception's frames) while a pass costs what the live
objects cost, about once a minute, not a walk over every record in flight every few thousand allocations.
"""

from __future__ import annotations

import gc
import logging
import threading
import time

_logger = logging.getLogger(__name__)

#: Seconds between full passes.
FULL_COLLECTION_SECONDS = 60.0
#: Tracked objects more than after the last pass (allocated minus freed) that start a pass before its time.
GROWTH_LIMIT = 1_000_000
_CHECK_SECONDS = 0.5


class CollectionPolicy:
    """Applies the policy above for the life of the gateway (``start`` once it is built, ``stop`` at shutdown)."""

    def __init__(
        self, full_collection_seconds: float = FULL_COLLECTION_SECONDS, growth_limit: int = GROWTH_LIMIT
    ) -> None:
        self._interval = full_collection_seconds
        self._growth_limit = growth_limit
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._was_enabled = gc.isenabled()

    def start(self) -> None:
        if self._thread is not None:
            return
        gc.collect()
        gc.freeze()
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._thread = threading.Thread(target=self._collect_forever, name="prime-otel-gateway-gc", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stopped.set()
        self._thread.join(5.0)
        self._thread = None
        gc.unfreeze()
        if self._was_enabled:
            gc.enable()

    def _collect_forever(self) -> None:
        last = time.monotonic()
        while not self._stopped.wait(_CHECK_SECONDS):
            now = time.monotonic()
            if now - last < self._interval and gc.get_count()[0] < self._growth_limit:
                continue
            found = gc.collect()
            last = time.monotonic()
            _logger.debug("full collection: %d unreachable objects in %.3f s", found, last - now)
