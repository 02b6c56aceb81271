"""One fixed set of delivery threads for every run on the gateway (no thread per run).

Each run's uploader feeds a ``Lane``: its batches, delivered in order, one delivery at a time. A lane with work
waits in the pool's ready queue; a worker takes it, delivers what it holds, and puts it back at the end of the
queue if more arrived meanwhile, so a busy run does not starve the others. A run whose platform calls stall
holds one worker while they last: with ``workers`` stalled runs the others wait, and the queued-bytes bounds
answer 503 meanwhile.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from ._defaults import DEFAULT_WORKERS

_logger = logging.getLogger(__name__)

#: Records one delivery takes from a lane at most (the rest go in the next turn). A turn's records are decoded
#: together and live until its sinks wrote them: a whole run's backlog at once would hold hundreds of thousands of
#: objects, which every garbage collection pass meanwhile walks.
MAX_RECORDS_PER_TURN = 256


class DeliveryPool:
    def __init__(self, workers: int = DEFAULT_WORKERS, name: str = "prime-otel-gateway-delivery") -> None:
        self._ready: queue.SimpleQueue[Lane | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{number}", daemon=True) for number in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def workers(self) -> int:
        return len(self._threads)

    def lane(self, deliver: Callable[[list[Any]], None], weight: Callable[[Any], int] | None = None) -> Lane:
        return Lane(self, deliver, weight)

    def schedule(self, lane: Lane) -> None:
        self._ready.put(lane)

    def stop(self, timeout: float = 5.0) -> None:
        for _ in self._threads:
            self._ready.put(None)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _work(self) -> None:
        while True:
            lane = self._ready.get()
            if lane is None:
                return
            lane.take_turn()


class Lane:
    """One uploader's batches, delivered in order by the pool; ``wait_idle`` is the flush. ``weight``: how many
    records an item holds (1 each by default); a turn takes items up to ``MAX_RECORDS_PER_TURN`` records (at least
    one item)."""

    def __init__(
        self, pool: DeliveryPool, deliver: Callable[[list[Any]], None], weight: Callable[[Any], int] | None = None
    ) -> None:
        self._pool = pool
        self._deliver = deliver
        self._weight = weight
        self._items: deque[Any] = deque()
        self._scheduled = False
        self._delivering = False
        self._changed = threading.Condition(threading.Lock())

    def queued(self) -> list[Any]:
        """The items not yet taken by a delivery."""
        with self._changed:
            return list(self._items)

    def push(self, items: list[Any]) -> None:
        with self._changed:
            self._items.extend(items)
            if self._scheduled:
                return
            self._scheduled = True
        self._pool.schedule(self)

    def take_turn(self) -> None:
        """On a pool worker: deliver what the lane holds (up to a turn's worth), then give the worker back."""
        with self._changed:
            items = self._take()
            self._delivering = True
        try:
            if items:
                self._deliver(items)
        except Exception:
            _logger.exception("delivering %d records failed unexpectedly; the lane goes on", len(items))
        with self._changed:
            self._delivering = False
            again = bool(self._items)
            self._scheduled = again
            self._changed.notify_all()
        if again:
            self._pool.schedule(self)

    def _take(self) -> list[Any]:
        if self._weight is None:
            return [self._items.popleft() for _ in range(min(len(self._items), MAX_RECORDS_PER_TURN))]
        items: list[Any] = []
        records = 0
        while self._items and (not items or records + self._weight(self._items[0]) <= MAX_RECORDS_PER_TURN):
            item = self._items.popleft()
            records += self._weight(item)
            items.append(item)
        return items

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait until everything pushed so far was delivered; False when the deadline came first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while self._items or self._delivering:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._changed.wait(left)
        return True


def _batch_records(batch: tuple[str, list[Any]]) -> int:
    return len(batch[1])


class PooledUploader:
    """Mixin for an ``Uploader`` whose batches go through a pool ``Lane`` instead of its own thread: ``push`` queues
    a batch, ``flush`` and ``close`` wait for the lane (the uploader's thread is never started)."""

    _lane: Lane | None = None

    def attach(self, pool: DeliveryPool | None) -> None:
        self._lane = None if pool is None else pool.lane(self._deliver_batches, _batch_records)
        # A run's sinks write in turn on the delivering thread, not from a lane (a thread) per sink: the shared
        # pool is what keeps a thousand runs from holding thousands of threads.
        self.lanes: list[Any] = []

    def _dispatch_to_slots(self, items: Sequence[Any], seqs: Sequence[int] | None = None) -> None:
        for slot in self.slots:  # type: ignore[attr-defined]
            try:
                slot.dispatch(items, seqs)
            except Exception:
                _logger.exception("the %s sink raised unexpectedly; the gateway continues", slot.name)

    def push(self, kind: str, items: list[Any]) -> bool:
        """Queue one batch; False once the uploader is closing."""
        assert self._lane is not None
        if getattr(self, "_stopping", False):
            return False
        self._lane.push([(kind, items)])
        return True

    def _deliver_batches(self, batches: list[tuple[str, list[Any]]]) -> None:
        """Consecutive batches of one kind in one delivery, as the uploader's own thread coalesces them."""
        start = 0
        while start < len(batches):
            kind = batches[start][0]
            end = start
            items: list[Any] = []
            while end < len(batches) and batches[end][0] == kind:
                items.extend(batches[end][1])
                end += 1
            self._deliver(items)  # type: ignore[attr-defined]
            start = end

    def flush(self, timeout: float | None = 30.0, *, drain_spool: bool = False) -> bool:
        if self._lane is None:
            return super().flush(timeout, drain_spool=drain_spool)  # type: ignore[misc]
        idle = self._lane.wait_idle(timeout)
        self._flush_sinks()  # type: ignore[attr-defined]
        return idle

    def close(self, timeout: float | None = 30.0) -> bool:
        if self._lane is not None and not getattr(self, "_closed", False):
            self._stopping = True
            if not self._lane.wait_idle(timeout):
                abandoned = sum(len(items) for _, items in self._lane.queued())
                for slot in self.slots:  # type: ignore[attr-defined]
                    if slot.sink.enabled:
                        slot.add_failed(abandoned, "still being delivered when the run closed")
                _logger.warning("%d records still being delivered at the deadline are counted as lost", abandoned)
                return False
        return super().close(timeout)  # type: ignore[misc]
