"""The records processor: a bounded queue in front of one uploader thread that feeds every sink.

It keeps the shape of the SDK's ``BatchSpanProcessor`` (``on_end`` enqueues, a daemon worker exports in
batches, ``force_flush`` and ``shutdown``) but owns its queue, because the run contract needs what the
SDK's batch processor does not give: a full queue blocks the producer briefly and then drops the *newest*
batch and counts it (the SDK silently evicts the oldest), flushes honour their deadline, and export
results are acted on (strikes, retirement) per sink.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from .._fork import register_for_fork_reset
from ._slot import SinkSlot
from ._spans import RECORD_SPAN_NAMES, RecordSpan, record_kind

_logger = logging.getLogger(__name__)

DEFAULT_MAX_QUEUE_BATCHES = 256
DEFAULT_PUT_TIMEOUT_SECONDS = 5.0
_STOP = object()


@dataclass
class _Batch:
    kind: str
    items: list[Any]


class _Barrier:
    def __init__(self) -> None:
        self.done = threading.Event()


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


class RecordProcessor(SpanProcessor):
    """Delivers ``episode`` and ``trace`` spans (and records submitted directly) to a list of sinks."""

    def __init__(
        self,
        slots: Sequence[SinkSlot],
        resource: Resource,
        *,
        max_queue_batches: int = DEFAULT_MAX_QUEUE_BATCHES,
        put_timeout: float = DEFAULT_PUT_TIMEOUT_SECONDS,
        thread_name: str = "prime-otel-uploader",
    ) -> None:
        self.slots = list(slots)
        self.dropped_records = 0
        self.abandoned_records = 0
        self._undelivered = 0
        self.shutdown_timeout: float | None = 30.0
        self._resource = resource
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
        self._stopping = False
        self._closed = False

    # -- producer side -------------------------------------------------------------------------

    def submit(self, records: list[Any]) -> bool:
        """Queue one producer batch; blocks at most ``put_timeout`` when full, then drops and counts it."""
        if not self.slots or not records:
            return True
        if self._stopping:
            return False
        return self._put(_Batch(record_kind(records[0]), records), len(records))

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        if span.name not in RECORD_SPAN_NAMES or not self.slots or self._stopping:
            return
        self._put(_Batch(span.name, [span]), 1)

    def _put(self, batch: _Batch, count: int) -> bool:
        self._ensure_worker()
        try:
            self._queue.put(batch, timeout=self._put_timeout)
            with self._lock:
                self._undelivered += count
        except queue.Full:
            with self._lock:
                self.dropped_records += count
                total = self.dropped_records
            _logger.warning(
                "uploader queue full for %.1f s: dropped %d records (%d so far); the producer outran the uploader",
                self._put_timeout,
                count,
                total,
            )
            return False
        return True

    def _ensure_worker(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                thread = threading.Thread(target=self._work, name=self._thread_name, daemon=True)
                thread.start()
                self._thread = thread

    # -- uploader thread -------------------------------------------------------------------------

    def _next_item(self) -> object:
        if self._pending is not None:
            item, self._pending = self._pending, None
            return item
        return self._queue.get()

    def _work(self) -> None:
        while True:
            item = self._next_item()
            if item is _STOP:
                return
            if isinstance(item, _Barrier):
                self._flush_sinks()
                item.done.set()
                continue
            assert isinstance(item, _Batch)
            items = list(item.items)
            self._coalesce_into(item.kind, items)
            self._dispatch(items)

    def _coalesce_into(self, kind: str, items: list[Any]) -> None:
        """Drain what queued during the last request into one dispatch, stopping at control items and kind changes."""
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

    def _dispatch(self, items: list[Any]) -> None:
        logged_at = time.time_ns()
        spans = [i if isinstance(i, ReadableSpan) else RecordSpan(i, self._resource, logged_at) for i in items]
        for slot in self.slots:
            try:
                slot.dispatch(spans)
            except Exception:
                _logger.exception("the %s sink raised unexpectedly; the uploader continues", slot.name)
        with self._lock:
            self._undelivered -= len(items)

    def _flush_sinks(self) -> None:
        for slot in self.slots:
            if slot.exporter.enabled:
                try:
                    slot.exporter.flush()
                except Exception:
                    _logger.exception("flushing the %s sink failed", slot.name)

    # -- flush and shutdown ----------------------------------------------------------------------

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until everything queued before this call was written; False when the deadline passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        thread = self._thread
        if thread is None or not thread.is_alive():
            self._flush_sinks()
            return True
        barrier = _Barrier()
        try:
            self._queue.put(barrier, timeout=_remaining(deadline))
        except queue.Full:
            return False
        return barrier.done.wait(_remaining(deadline))

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.flush(timeout_millis / 1000.0)

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
                self._queue.put(_STOP, timeout=_remaining(deadline))
            except queue.Full:
                _logger.warning("the uploader queue stayed saturated; could not ask the uploader to stop")
            thread.join(_remaining(deadline))
            if thread.is_alive():
                self._abandon_undelivered()
                return False
        for slot in self.slots:
            try:
                slot.exporter.close()
            except Exception:
                _logger.exception("closing the %s sink failed", slot.name)
        return True

    def _abandon_undelivered(self) -> None:
        """At the deadline, whatever is queued or in flight counts as failed on every sink that was still writing."""
        with self._lock:
            self.abandoned_records = self._undelivered
        for slot in self.slots:
            if slot.exporter.enabled:
                slot.add_failed(self.abandoned_records)
        _logger.warning(
            "the uploader is still writing at the deadline: %d records counted as lost; its sinks are left open",
            self.abandoned_records,
        )

    def shutdown(self) -> None:
        self.close(self.shutdown_timeout)

    def reset_after_fork(self) -> None:
        """In a forked child: the parent's queued records are the parent's; counters and strikes carry over."""
        self._init_runtime_state()
        for slot in self.slots:
            slot.exporter.reset_after_fork()
