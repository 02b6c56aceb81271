"""The uploader: a bounded queue in front of one daemon thread that prepares records for a list of sinks, each
written from its own lane (``_lanes.py``) so that no sink waits on another.

It keeps the shape of the SDK's ``BatchSpanProcessor`` (a daemon worker exports in batches; flush and
shutdown) but owns its queue, because the run contract needs what the SDK's batch processor does not give:
a full queue blocks the producer briefly and then drops the *newest* batch and counts it (the SDK silently
evicts the oldest), flushes honour their deadline, and export results are acted on (strikes, retirement)
per sink.

The queue is bounded in bytes (``max_queue_bytes``) as well as in batches: a training loop that outruns the
platform would otherwise keep 256 of its step batches alive, whatever their size. The producer's records are
not encoded on its thread, so a batch's bytes are estimated: its record count times the mean JSON size the
uploader measured for records of that kind when it encoded them. Until a kind has been measured only the
batch bound applies to it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic

from .._fork import register_for_fork_reset
from .._sink import RecordT
from .._throttle import ThrottledWarning
from ._lanes import Delivery, Handout, LaneBarrier, SinkLane
from ._slot import SinkSlot
from ._spool import RunSpool, SpooledRecord

_logger = logging.getLogger(__name__)

DEFAULT_MAX_QUEUE_BATCHES = 256
#: Records waiting for the uploader, estimated as their JSON (the spool's form); the batch in flight holds at most
#: as much again. A record's Python objects take several times its JSON (a verifiers episode about 6x).
DEFAULT_MAX_QUEUE_BYTES = 1024 * 1024
DEFAULT_PUT_TIMEOUT_SECONDS = 5.0
# With a spool, a request older than this means the platform is slow: producers that find the queue full stop
# waiting for the uploader and spill. Shorter requests are waited out, which costs less CPU than a spill.
SLOW_REQUEST_SECONDS = 0.5
_ADMIT_SLICE_SECONDS = 0.01
SPILLED_IN_MEMORY_BYTES = 8 * 1024 * 1024
_STOP = object()
# How much each delivery's measured mean moves a kind's estimate of bytes per record.
_ESTIMATE_WEIGHT = 0.25
# How often a waiting flush looks whether the uploader thread is still there to answer its barrier.
_FLUSH_CHECK_SECONDS = 0.05


@dataclass
class _Batch:
    kind: str
    items: list[Any]
    estimated_bytes: int


class _RecordSizes:
    """Mean JSON bytes per record of each kind, measured on the uploader thread where records are encoded anyway
    (a smoothed mean, so a run whose records grow moves its estimate with them)."""

    def __init__(self) -> None:
        self._per_record: dict[str, float] = {}

    def estimate(self, kind: str, count: int) -> int:
        """The bytes of ``count`` records of ``kind``; 0 while the kind is unmeasured."""
        return int(self._per_record.get(kind, 0.0) * count)

    def measure(self, kind: str, encoded: Sequence[bytes]) -> None:
        if not encoded:
            return
        mean = sum(len(data) for data in encoded) / len(encoded)
        known = self._per_record.get(kind)
        self._per_record[kind] = mean if known is None else known + _ESTIMATE_WEIGHT * (mean - known)


class _Outstanding:
    """The records and estimated bytes of one delivery, given back to the queue's bounds once every lane wrote it
    (or at once when the delivery reached no lane)."""

    def __init__(
        self, uploader: Uploader, records: int, estimated_bytes: int, then: Callable[[], None] | None = None
    ) -> None:
        self._uploader = uploader
        self._records = records
        self._bytes = estimated_bytes
        self._then = then
        self._released = False
        self.handed = False

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        uploader = self._uploader
        with uploader._room:
            uploader._delivering_bytes -= self._bytes
            uploader._room.notify_all()
        with uploader._lock:
            uploader._undelivered -= self._records
        if self._then is not None:
            self._then()
        uploader._report_settled()


class _Barrier:
    def __init__(self, drain_spool: bool = False, deadline: float | None = None) -> None:
        self.done = threading.Event()
        self.drain_spool = drain_spool
        self.deadline = deadline


class _SpilledRecords(Generic[RecordT]):
    """What the producer spilled, kept in memory (up to ``max_bytes`` of encoded records) until every sink has it,
    so a replay soon after a spill sends the records already encoded instead of reading them back."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._kept: dict[int, tuple[RecordT, int]] = {}
        self._lock = threading.Lock()

    def keep(self, seqs: Sequence[int], items: Sequence[RecordT], encoded: Sequence[bytes]) -> None:
        with self._lock:
            for seq, item, data in zip(seqs, items, encoded, strict=True):
                if self._bytes + len(data) > self._max_bytes:
                    return
                self._kept[seq] = (item, len(data))
                self._bytes += len(data)

    def recall(self, seq: int) -> RecordT | None:
        kept = self._kept.get(seq)
        return None if kept is None else kept[0]

    def forget_below(self, seq: int | None) -> None:
        """Drop what every sink has settled: seqs below ``seq`` (None: all)."""
        with self._lock:
            for kept in [k for k in self._kept if seq is None or k < seq]:
                self._bytes -= self._kept.pop(kept)[1]


def _nothing() -> None:
    return None


def remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _slice(left: float | None) -> float:
    return _FLUSH_CHECK_SECONDS if left is None else min(left, _FLUSH_CHECK_SECONDS)


class Uploader(Generic[RecordT]):
    """Queue, worker, coalescing and barriers; subclasses say how a coalesced batch reaches the sinks.

    The queue holds what the producer handed over, as it is (``_prepare`` checks it on the uploader thread);
    the sinks, the spool and a replay see ``RecordT``, the records those items become.
    """

    def __init__(
        self,
        slots: Sequence[SinkSlot[RecordT]],
        *,
        max_queue_batches: int = DEFAULT_MAX_QUEUE_BATCHES,
        max_queue_bytes: int = DEFAULT_MAX_QUEUE_BYTES,
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
        #: Called on the uploader thread after each delivery settled its records (a joined worker reports its
        #: progress to the run's owner through it).
        self.on_settled: Callable[[], None] | None = None
        self._undelivered = 0
        self._queue_full_warning = ThrottledWarning(_logger)
        self._max_queue_batches = max_queue_batches
        self._max_queue_bytes = max_queue_bytes
        self._record_sizes = _RecordSizes()
        self._put_timeout = put_timeout
        self._thread_name = thread_name
        self.lanes = [
            SinkLane(
                slot,
                recall=self._recall,
                on_replayed=self._forget_settled,
                thread_name=f"{thread_name}-{slot.name}",
                max_backlog_deliveries=max_queue_batches,
                max_backlog_bytes=max_queue_bytes,
            )
            for slot in self.slots
        ]
        # What the uploader holds at most: the queue's bound waiting, as much again in the lanes, and what a lane that
        # packs large writes holds beyond that.
        packing = max((lane.max_write_bytes - max_queue_bytes for lane in self.lanes), default=0)
        self._max_held_bytes = 2 * max_queue_bytes + max(0, packing)
        by_sink = {lane.slot.name: lane for lane in self.lanes}
        for lane in self.lanes:
            follows = getattr(lane.slot.sink, "follows", None)
            lane.leader = by_sink.get(follows) if isinstance(follows, str) else None
        self._init_runtime_state()
        register_for_fork_reset(self)

    def _init_runtime_state(self) -> None:
        # Unbounded itself (control items always get in); batches are admitted against ``_room``.
        self._queue: queue.Queue[object] = queue.Queue()
        self._lock = threading.Lock()
        self._room = threading.Condition(threading.Lock())
        self._waiting_batches = 0
        self._waiting_bytes = 0
        self._delivering_bytes = 0
        self._thread: threading.Thread | None = None
        self._pending: object | None = None
        # When the uploader thread entered the sink call it is in (mostly waiting on the platform); read by producers.
        self._sending_since: float | None = None
        self._spilled: _SpilledRecords[RecordT] = _SpilledRecords(SPILLED_IN_MEMORY_BYTES)
        self._outstanding: _Outstanding | None = None
        self._stopping = False
        self._closed = False

    @property
    def queued_records(self) -> int:
        """Records accepted but not yet delivered to every sink."""
        return self._undelivered

    @property
    def held_bytes(self) -> int:
        """Estimated JSON bytes of the records accepted and not yet delivered: at most ``max_queue_bytes`` waiting
        plus as much in flight (or one larger batch, admitted alone)."""
        return self._waiting_bytes + self._delivering_bytes

    # -- producer side -------------------------------------------------------------------------

    def _put(self, kind: str, items: list[Any]) -> bool:
        """Queue one batch. Without a spool it blocks at most ``put_timeout`` when full, then drops and counts the
        batch; with one, the batch is spilled to disk instead."""
        if not self.slots or not items:
            return True
        if self._stopping:
            return False
        self._ensure_worker()
        batch = _Batch(kind, items, self._record_sizes.estimate(kind, len(items)))
        if not self._admit(batch):
            left = self._spill(kind, items) if self.spool is not None else len(items)
            if not left:
                return True
            with self._lock:
                self.dropped_records += left
                total = self.dropped_records
            self._queue_full_warning.warn(
                "uploader queue full for %.1f s: dropped %d records (%d so far); the producer outran the uploader",
                self._put_timeout,
                left,
                total,
            )
            return False
        with self._lock:
            self._undelivered += len(items)
        return True

    def _admit(self, batch: _Batch) -> bool:
        """Queue ``batch``; False when the queue stayed full. Without a spool the producer waits up to
        ``put_timeout``. With one it waits while the uploader is encoding (it takes the whole queue as soon as
        it is done) and while its request is younger than ``SLOW_REQUEST_SECONDS``; after that the batch goes
        to disk at once, so a slow platform holds the producer back for half a second at most."""
        give_up = time.monotonic() + self._put_timeout
        with self._room:
            while not self._fits(batch):
                now = time.monotonic()
                if now >= give_up:
                    return False
                if self.spool is None:
                    self._room.wait(give_up - now)
                    continue
                since = self._sending_since
                if since is not None and now - since >= SLOW_REQUEST_SECONDS:
                    return False
                self._room.wait(_ADMIT_SLICE_SECONDS)
            self._waiting_batches += 1
            self._waiting_bytes += batch.estimated_bytes
        self._queue.put(batch)
        return True

    def _fits(self, batch: _Batch) -> bool:
        """Room for ``batch``: within both bounds, or the queue is empty (a batch larger than the byte bound
        is taken alone), and what the sinks' lanes hold leaves room for it (all held stays within twice the
        byte bound, plus what a packing lane may gather, or one batch)."""
        held = self._waiting_bytes + self._delivering_bytes
        if held and held + batch.estimated_bytes > self._max_held_bytes:
            return False
        if self._waiting_batches == 0:
            return True
        return (
            self._waiting_batches < self._max_queue_batches
            and self._waiting_bytes + batch.estimated_bytes <= self._max_queue_bytes
        )

    def _take(self, batch: _Batch, *, delivering: bool = True) -> list[Any]:
        """On the uploader thread: the batch's records, out of the queue (in flight unless ``delivering`` is
        False); its room goes back to the producers."""
        items, batch.items = batch.items, []
        with self._room:
            self._waiting_batches -= 1
            self._waiting_bytes -= batch.estimated_bytes
            if delivering:
                self._delivering_bytes += batch.estimated_bytes
            self._room.notify_all()
        return items

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

    def _encode_for_spool(self, items: Sequence[RecordT]) -> list[bytes]:
        """Each prepared item's record as compact JSON, the form the spool keeps."""
        raise NotImplementedError

    def _from_spool(self, records: list[SpooledRecord]) -> list[RecordT]:
        """Items rebuilt from spooled records, for a replay through the sinks."""
        raise NotImplementedError

    def _prepare(self, items: list[Any]) -> list[RecordT]:
        """Items as the sinks take them (the records processor makes spans of the producer's records, leaving out,
        and counting as failed, those no sink can take)."""
        return items

    def _spool_kinds(self, kind: str, items: Sequence[RecordT]) -> str | list[str]:
        """The kind the spool logs for each prepared item (one for the whole batch unless a subclass knows better)."""
        return kind

    def _spill(self, kind: str, items: list[Any]) -> int:
        """On the producer's thread, when the queue is full: log the batch as never sent to any sink. Returns how
        many records it could not keep (the spool is full), 0 when every record is logged or was counted already."""
        assert self.spool is not None
        prepared = self._prepare(items)
        if not prepared:
            return 0
        encoded = self._encode_for_spool(prepared)
        self._record_sizes.measure(kind, encoded)
        seqs = self.spool.append(self._spool_kinds(kind, prepared), encoded)
        if seqs is None:
            return len(prepared)
        self._spilled.keep(seqs, prepared, encoded)
        for slot in self.slots:
            self.spool.defer(slot.name, seqs, dispatched=False)
        with self._lock:
            self.spilled_records += len(prepared)
        return 0

    def _log(self, kind: str, items: Sequence[RecordT]) -> list[int] | None:
        """Append the prepared items to the spool (their seqs; None without one), measuring their size on the way.
        Without a spool one record per delivery is encoded to keep the estimate (exporters reuse the encoding)."""
        encoded = self._encode_for_spool(items if self.spool is not None else items[:1])
        self._record_sizes.measure(kind, encoded)
        return self.spool.append(self._spool_kinds(kind, items), encoded) if self.spool is not None else None

    def _replay_pending(self, *, force: bool = False, deadline: float | None = None) -> None:
        """On the caller's thread, while no lane runs: send spooled records to the sinks that can take them again
        (with ``force``: until none is left or the deadline passes)."""
        for lane in self.lanes:
            lane.replay_here(force=force, deadline=deadline)

    def _forget_settled(self) -> None:
        """Spilled records kept in memory are dropped once every sink has them."""
        if self.spool is None:
            return
        oldest = [seq for slot in self.slots for seq in self.spool.oldest_pending(slot.name, 1)]
        self._spilled.forget_below(min(oldest) if oldest else None)

    def _recall(self, records: list[SpooledRecord]) -> list[RecordT]:
        """The items to replay for spooled records: the ones still in memory as spilled, the rest rebuilt."""
        kept = [self._spilled.recall(record.seq) for record in records]
        rebuilt = iter(self._from_spool([r for r, item in zip(records, kept, strict=True) if item is None]))
        return [item if item is not None else next(rebuilt) for item in kept]

    def _next_item(self) -> object:
        if self._pending is not None:
            item, self._pending = self._pending, None
            return item
        while True:
            try:
                return self._queue.get(timeout=self._tick_timeout())
            except queue.Empty:
                self._tick()

    def _report_settled(self) -> None:
        listener = self.on_settled
        if listener is not None:
            try:
                listener()
            except Exception:
                _logger.debug("reporting the uploader's progress failed", exc_info=True)

    def _when_written(self, items: list[Any]) -> Callable[[], None] | None:
        """What to do once every lane wrote a delivery of ``items`` (None: nothing)."""
        return None

    def _tick_timeout(self) -> float | None:
        """How long the uploader thread waits for work before ``_tick`` (None: forever)."""
        return None

    def _tick(self) -> None:
        """Periodic work on the uploader thread while no batch arrives."""

    def _release_held(self) -> None:
        """On the uploader thread, when a flush or the stop reaches it: hand the lanes what is still held back."""

    def _work(self) -> None:
        while True:
            item = self._next_item()
            if item is _STOP:
                try:
                    self._release_held()
                except Exception:
                    _logger.exception("handing the last held records to the sinks failed")
                return
            if isinstance(item, _Barrier):
                self._pass_barrier(item)
                continue
            assert isinstance(item, _Batch)
            self._deliver_batch(item)

    def _pass_barrier(self, barrier: _Barrier) -> None:
        """Hand the barrier to every lane; it is done (the spool saved) once the last lane passed it. The uploader
        goes on preparing what follows meanwhile."""
        try:
            self._release_held()
        except Exception:
            _logger.exception("preparing a flush failed unexpectedly; the uploader continues")

        def passed() -> None:
            if self.spool is not None:
                self.spool.save()
            barrier.done.set()

        if not self.lanes:
            passed()
            return
        lane_barrier = LaneBarrier(len(self.lanes), barrier.drain_spool, barrier.deadline, passed)
        for lane in self.lanes:
            lane.barrier(lane_barrier)

    def _deliver_batch(self, first: _Batch) -> None:
        """One delivery: ``first`` and what queued behind it, prepared here and handed to every lane. Its records
        count against the queue's bounds until every lane wrote them."""
        estimated = first.estimated_bytes
        items = list(self._take(first))
        estimated += self._coalesce_into(first.kind, items)
        outstanding = self._outstanding = _Outstanding(self, len(items), estimated, self._when_written(items))
        try:
            self._deliver(items)
        except Exception:
            _logger.exception("delivering %d records failed unexpectedly; the uploader continues", len(items))
        finally:
            self._outstanding = None
            if not outstanding.handed:
                outstanding.release()

    def _coalesce_into(self, kind: str, items: list[Any]) -> int:
        """Drain what queued meanwhile into one delivery (at most ``max_queue_bytes``), stopping at control items
        and kind changes; the estimated bytes taken."""
        taken = 0
        while True:
            try:
                following = self._queue.get_nowait()
            except queue.Empty:
                return taken
            if (
                isinstance(following, _Batch)
                and following.kind == kind
                and self._delivering_bytes + following.estimated_bytes <= self._max_queue_bytes
            ):
                taken += following.estimated_bytes
                items.extend(self._take(following))
                continue
            self._pending = following
            return taken

    def _dispatch_to_slots(self, items: Sequence[RecordT], seqs: Sequence[int] | None = None) -> None:
        """Hand prepared items (and their spool seqs) to every sink's lane."""
        outstanding = self._outstanding
        release: Callable[[], None] = _nothing
        if outstanding is not None and not outstanding.handed:
            outstanding.handed = True
            release = outstanding.release
        if not self.lanes:
            release()
            return
        handout = Handout(len(self.lanes), release)
        batch = list(items)
        seq_list = list(seqs) if seqs is not None else None
        kind = self._kind_of(batch)
        estimated = self._record_sizes.estimate(kind, len(batch))
        for lane in self.lanes:
            lane.hand(Delivery(kind, batch, seq_list, estimated, handout), on_wait=self._waiting_on_lane)

    def _kind_of(self, items: Sequence[Any]) -> str:
        """The kind of ``items`` (a lane writes kinds apart; its measured size bounds a lane's backlog)."""
        name = getattr(items[0], "name", None) if items else None
        return name if isinstance(name, str) else ""

    def _waiting_on_lane(self, waiting: bool) -> None:
        self._sending_since = time.monotonic() if waiting else None

    def _flush_sinks(self) -> None:
        if self.spool is not None:
            self.spool.save()
        for slot in self.slots:
            if slot.sink.enabled:
                try:
                    slot.sink.flush()
                except Exception:
                    _logger.exception("flushing the %s sink failed", slot.name)

    # -- flush and close ---------------------------------------------------------------------------

    def flush(self, timeout: float | None = 30.0, *, drain_spool: bool = False) -> bool:
        """Wait until everything queued before this call was written; False when the deadline passed first.
        With ``drain_spool``, every sink (paused ones too) is also given what its spool holds, until the deadline."""
        deadline = None if timeout is None else time.monotonic() + timeout
        thread = self._thread
        if thread is None or not thread.is_alive():
            if any(lane.alive for lane in self.lanes):
                return False  # closed while a lane still writes: nothing may touch its sink meanwhile
            if drain_spool:
                self._replay_pending(force=True, deadline=deadline)
            self._flush_sinks()
            return True
        barrier = _Barrier(drain_spool, deadline)
        self._queue.put(barrier)
        # In slices: a close on another thread may stop the uploader before it reaches this barrier.
        while not barrier.done.wait(_slice(remaining(deadline))):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if not thread.is_alive():
                return self._undelivered == 0
        return True

    def close(self, timeout: float | None = 30.0) -> bool:
        """Stop after writing what is queued; sinks stay open (and False is returned) if a worker outlives it."""
        if self._closed:
            return True
        self._closed = True
        self._stopping = True
        deadline = None if timeout is None else time.monotonic() + timeout
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._queue.put(_STOP)
            thread.join(remaining(deadline))
            if thread.is_alive():
                self._abandon_undelivered(self.lanes)
                return False
        running = [lane for lane in self.lanes if lane.alive]
        for lane in running:
            lane.stop(deadline)
        stuck = [lane for lane in running if not lane.join(remaining(deadline))]
        if stuck:
            self._abandon_undelivered(stuck)
            return False
        if self.spool is not None:
            self.spool.save()
            self.spool.discard_if_delivered()  # nothing stays on disk of a spool whose every record was delivered
        for slot in self.slots:
            try:
                slot.sink.close()
            except Exception:
                _logger.exception("closing the %s sink failed", slot.name)
        return True

    def _abandon_undelivered(self, lanes: Sequence[SinkLane]) -> None:
        """At the deadline, what is queued or in flight for a sink still writing counts as failed on it; with a
        spool, the queued batches go to it instead (what a lane holds is logged there already)."""
        queued = 0
        if self.spool is not None:
            self._spill_queue()
        else:
            queued = self._discard_queue()
        abandoned = 0
        for lane in lanes:
            lost = lane.abandon() + queued
            abandoned = max(abandoned, lost)
            if lost and lane.slot.sink.enabled:
                lane.slot.add_failed(lost)
        if self.spool is not None:
            self.spool.save()
        with self._lock:
            self.abandoned_records = abandoned
        self._report_settled()
        if abandoned:
            _logger.warning(
                "the uploader is still writing at the deadline: %d records counted as lost; its sinks are left open",
                abandoned,
            )

    def _discard_queue(self) -> int:
        """Without a spool, at the deadline: the batches still queued, taken out; how many records they held."""
        discarded = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return discarded
            if isinstance(item, _Batch):
                discarded += len(self._take(item, delivering=False))

    def _spill_queue(self) -> None:
        before = self.spilled_records
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, _Batch):
                items = self._take(item, delivering=False)
                left = self._spill(item.kind, items)
                if left:
                    with self._lock:
                        self.dropped_records += left
        _logger.warning(
            "the uploader is still writing at the deadline: %d queued records were kept in the spool (%s)",
            self.spilled_records - before,
            self.spool.folder if self.spool is not None else "",
        )

    def reset_after_fork(self) -> None:
        """In a forked child: the parent's queued records are the parent's; counters and strikes carry over."""
        self._init_runtime_state()
        self._undelivered = 0
        self._queue_full_warning.reset_after_fork()
        for slot in self.slots:
            slot.reset_after_fork()
        for lane in self.lanes:
            lane.reset_after_fork()
