"""The uploader: a bounded queue in front of one daemon thread that feeds a list of sinks.

It keeps the shape of the SDK's ``BatchSpanProcessor`` (a daemon worker exports in batches; flush and
shutdown) but owns its queue, because the run contract needs what the SDK's batch processor does not give:
a full queue blocks the producer briefly and then drops the *newest* batch and counts it (the SDK silently
evicts the oldest), flushes honour their deadline, and export results are acted on (strikes, retirement)
per sink.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._fork import register_for_fork_reset
from .._spool import RunSpool, SpooledRecord
from ._slot import SinkSlot

_logger = logging.getLogger(__name__)

DEFAULT_MAX_QUEUE_BATCHES = 256
DEFAULT_PUT_TIMEOUT_SECONDS = 5.0
SPOOL_PUT_TIMEOUT_SECONDS = 0.05
_STOP = object()
_IDLE_REPLAY_SECONDS = 1.0


@dataclass
class _Batch:
    kind: str
    items: list[Any]


class _Barrier:
    def __init__(self, drain_spool: bool = False, deadline: float | None = None) -> None:
        self.done = threading.Event()
        self.drain_spool = drain_spool
        self.deadline = deadline


def remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class Uploader:
    """Queue, worker, coalescing and barriers; subclasses say how a coalesced batch reaches the sinks."""

    def __init__(
        self,
        slots: Sequence[SinkSlot],
        *,
        max_queue_batches: int = DEFAULT_MAX_QUEUE_BATCHES,
        put_timeout: float = DEFAULT_PUT_TIMEOUT_SECONDS,
        thread_name: str = "prime-otel-uploader",
        spool: RunSpool | None = None,
    ) -> None:
        self.slots = list(slots)
        self.spool = spool
        self.spilled_records = 0
        self.dropped_records = 0
        self.abandoned_records = 0
        self.shutdown_timeout: float | None = 30.0
        self._undelivered = 0
        self._max_queue_batches = max_queue_batches
        self._put_timeout = put_timeout
        self._thread_name = thread_name
        self._init_runtime_state()
        register_for_fork_reset(self)

    def _init_runtime_state(self) -> None:
        self._queue: queue.Queue[object] = queue.Queue(self._max_queue_batches)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pending: object | None = None
        # Set while the uploader thread is inside a sink call (mostly waiting on the platform), read by producers.
        self._sending = False
        self._stopping = False
        self._closed = False

    @property
    def queued_records(self) -> int:
        """Records accepted but not yet delivered to every sink."""
        return self._undelivered

    # -- producer side -------------------------------------------------------------------------

    def _put(self, kind: str, items: list[Any]) -> bool:
        """Queue one batch. Without a spool it blocks at most ``put_timeout`` when full, then drops and counts the
        batch; with one, the batch is spilled to disk instead."""
        if not self.slots or not items:
            return True
        if self._stopping:
            return False
        self._ensure_worker()
        batch = _Batch(kind, items)
        if not self._admit(batch):
            if self.spool is not None and self._spill(kind, items):
                return True
            with self._lock:
                self.dropped_records += len(items)
                total = self.dropped_records
            _logger.warning(
                "uploader queue full for %.1f s: dropped %d records (%d so far); the producer outran the uploader",
                self._put_timeout,
                len(items),
                total,
            )
            return False
        with self._lock:
            self._undelivered += len(items)
        return True

    def _admit(self, batch: _Batch) -> bool:
        """Queue ``batch``; False when the queue stayed full. Without a spool the producer waits up to
        ``put_timeout``. With one it waits while the uploader is busy encoding (it takes the whole queue as soon
        as it is done), and at most ``SPOOL_PUT_TIMEOUT_SECONDS`` while the uploader waits on the platform: then
        the batch goes to disk, so a slow platform does not hold the producer back."""
        if self.spool is None:
            try:
                self._queue.put(batch, timeout=self._put_timeout)
            except queue.Full:
                return False
            return True
        give_up = time.monotonic() + self._put_timeout
        while True:
            try:
                self._queue.put(batch, timeout=SPOOL_PUT_TIMEOUT_SECONDS)
                return True
            except queue.Full:
                if self._sending or time.monotonic() >= give_up:
                    return False

    def _ensure_worker(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                thread = threading.Thread(target=self._work, name=self._thread_name, daemon=True)
                thread.start()
                self._thread = thread

    # -- uploader thread -------------------------------------------------------------------------

    def _deliver(self, items: list[Any]) -> None:
        raise NotImplementedError

    def _encode_for_spool(self, items: list[Any]) -> list[bytes]:
        """Each item's record as compact JSON, the form the spool keeps."""
        raise NotImplementedError

    def _from_spool(self, records: list[SpooledRecord]) -> list[Any]:
        """Items rebuilt from spooled records, for a replay through the sinks."""
        raise NotImplementedError

    def _spill(self, kind: str, items: list[Any]) -> bool:
        """On the producer's thread, when the queue is full: log the batch as never sent to any sink."""
        assert self.spool is not None
        seqs = self.spool.append(kind, self._encode_for_spool(items))
        if seqs is None:
            return False
        for slot in self.slots:
            self.spool.defer(slot.name, seqs, dispatched=False)
        with self._lock:
            self.spilled_records += len(items)
        return True

    def _log(self, kind: str, items: list[Any]) -> list[int] | None:
        return self.spool.append(kind, self._encode_for_spool(items)) if self.spool is not None else None

    def _replay_pending(self, *, force: bool = False, deadline: float | None = None) -> None:
        """Send spooled records to the sinks that can take them again, while no new records wait (with
        ``force``: until none is left or the deadline passes)."""
        if self.spool is None:
            return
        for slot in self.slots:
            while slot.pending:
                self._sending = True
                try:
                    sent = slot.replay(self._from_spool, force=force)
                except Exception:
                    _logger.exception("replaying the %s sink's spool failed", slot.name)
                    break
                finally:
                    self._sending = False
                if not sent or (deadline is not None and time.monotonic() > deadline):
                    break
                if not force and not self._queue.empty():
                    break  # new records go first; the backlog resumes when the queue is idle again

    def _next_item(self) -> object:
        if self._pending is not None:
            item, self._pending = self._pending, None
            return item
        if self.spool is None:
            return self._queue.get()
        while True:
            try:
                return self._queue.get(timeout=_IDLE_REPLAY_SECONDS)
            except queue.Empty:
                self._replay_pending()

    def _work(self) -> None:
        while True:
            item = self._next_item()
            if item is _STOP:
                return
            if isinstance(item, _Barrier):
                if item.drain_spool:
                    self._replay_pending(force=True, deadline=item.deadline)
                self._flush_sinks()
                item.done.set()
                continue
            assert isinstance(item, _Batch)
            items = list(item.items)
            self._coalesce_into(item.kind, items)
            try:
                self._deliver(items)
                self._replay_pending()
            except Exception:
                _logger.exception("delivering %d records failed unexpectedly; the uploader continues", len(items))
            with self._lock:
                self._undelivered -= len(items)

    def _coalesce_into(self, kind: str, items: list[Any]) -> None:
        """Drain what queued during the last request into one delivery, stopping at control items and kind changes."""
        while True:
            try:
                following = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(following, _Batch) and following.kind == kind:
                items.extend(following.items)
                continue
            self._pending = following
            return

    def _dispatch_to_slots(self, items: Sequence[Any], seqs: Sequence[int] | None = None) -> None:
        self._sending = True
        try:
            for slot in self.slots:
                try:
                    slot.dispatch(items, seqs)
                except Exception:
                    _logger.exception("the %s sink raised unexpectedly; the uploader continues", slot.name)
        finally:
            self._sending = False

    def _flush_sinks(self) -> None:
        if self.spool is not None:
            self.spool.save()
        for slot in self.slots:
            if slot.exporter.enabled:
                try:
                    slot.exporter.flush()
                except Exception:
                    _logger.exception("flushing the %s sink failed", slot.name)

    # -- flush and close ---------------------------------------------------------------------------

    def flush(self, timeout: float | None = 30.0, *, drain_spool: bool = False) -> bool:
        """Wait until everything queued before this call was written; False when the deadline passed first.
        With ``drain_spool``, every sink (paused ones too) is also given what its spool holds, until the deadline."""
        deadline = None if timeout is None else time.monotonic() + timeout
        thread = self._thread
        if thread is None or not thread.is_alive():
            if drain_spool:
                self._replay_pending(force=True, deadline=deadline)
            self._flush_sinks()
            return True
        barrier = _Barrier(drain_spool, deadline)
        try:
            self._queue.put(barrier, timeout=remaining(deadline))
        except queue.Full:
            return False
        return barrier.done.wait(remaining(deadline))

    def close(self, timeout: float | None = 30.0) -> bool:
        """Stop after writing what is queued; sinks stay open (and False is returned) if the worker outlives it."""
        if self._closed:
            return True
        self._closed = True
        self._stopping = True
        deadline = None if timeout is None else time.monotonic() + timeout
        thread = self._thread
        if thread is not None and thread.is_alive():
            try:
                self._queue.put(_STOP, timeout=remaining(deadline))
            except queue.Full:
                _logger.warning("the uploader queue stayed saturated; could not ask the uploader to stop")
            thread.join(remaining(deadline))
            if thread.is_alive():
                self._abandon_undelivered()
                return False
        if self.spool is not None:
            self.spool.save()
        for slot in self.slots:
            try:
                slot.exporter.close()
            except Exception:
                _logger.exception("closing the %s sink failed", slot.name)
        return True

    def _abandon_undelivered(self) -> None:
        """At the deadline, whatever is queued or in flight counts as failed on every sink still writing; with
        a spool, the queued batches go to it instead (the one in flight is already there)."""
        if self.spool is not None:
            self._spill_queue()
            self.spool.save()
            return
        with self._lock:
            self.abandoned_records = self._undelivered
        for slot in self.slots:
            if slot.exporter.enabled:
                slot.add_failed(self.abandoned_records)
        _logger.warning(
            "the uploader is still writing at the deadline: %d records counted as lost; its sinks are left open",
            self.abandoned_records,
        )

    def _spill_queue(self) -> None:
        spilled = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, _Batch) and self._spill(item.kind, item.items):
                spilled += len(item.items)
        _logger.warning(
            "the uploader is still writing at the deadline: %d queued records were kept in the spool (%s)",
            spilled,
            self.spool.folder if self.spool is not None else "",
        )

    def reset_after_fork(self) -> None:
        """In a forked child: the parent's queued records are the parent's; counters and strikes carry over."""
        self._init_runtime_state()
        self._undelivered = 0
        for slot in self.slots:
            slot.reset_after_fork()
