"""Sink lanes: every sink of an uploader sends from its own thread and queue, so one sink waiting on the platform
(a 429's ``Retry-After``, a pacing gap, a slow or failing service) never delays another sink's requests.

The uploader thread prepares each delivery once (spans, the spool's log) and hands it to every lane. A lane
writes what reached it in order, lingering first when its sink packs records into fewer requests (the v0 sample
table: see ``linger_seconds`` on the sink), and replays its sink's spooled records when it has nothing new. A lane
whose backlog is full hands new deliveries to the spool (they wait there, counted, for its replay) instead of
holding the uploader; without a spool the uploader waits for room. A finish barrier gives every lane its
deadline: a retry or pacing wait that would outlast it is given up, and what was not sent stays in the spool.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._attempts import SENDER_WAIT
from ._slot import SinkSlot
from ._spool import SpooledRecord

_logger = logging.getLogger(__name__)

#: A lane with nothing new replays its sink's spool after this long.
IDLE_REPLAY_SECONDS = 1.0
#: Deliveries a lane holds before new ones go to the spool (or, without one, the uploader waits for room).
MAX_BACKLOG_DELIVERIES = 256
#: Estimated JSON bytes a lane holds (the delivery being written aside) before the same happens.
MAX_BACKLOG_BYTES = 1024 * 1024
#: A lane full behind a write older than this is waiting on the platform: with a spool, new deliveries wait there
#: instead of holding the uploader. A younger write is waited out (cheaper than the spool's write and read-back).
SLOW_WRITE_SECONDS = 0.5
_ROOM_SLICE_SECONDS = 0.01
#: Most records one lingering write packs (the sink splits them into requests within the platform's body cap).
MAX_LINGER_RECORDS = 10_000


class Handout:
    """One prepared delivery shared by every lane: released (``on_done``) once each lane has its outcome."""

    def __init__(self, lanes: int, on_done: Callable[[], None]) -> None:
        self._left = lanes
        self._on_done = on_done
        self._finished: set[str] = set()
        self._cond = threading.Condition(threading.Lock())

    def finished(self, lane: str) -> None:
        with self._cond:
            self._finished.add(lane)
            self._left -= 1
            last = self._left == 0
            self._cond.notify_all()
        if last:
            self._on_done()

    def wait_for(self, lane: str) -> None:
        """Until ``lane`` has its outcome for this delivery."""
        with self._cond:
            while lane not in self._finished:
                self._cond.wait()


@dataclass
class Delivery:
    kind: str
    items: list[Any]
    seqs: list[int] | None
    estimated_bytes: int
    handout: Handout


class LaneBarrier:
    """Passes every lane once what was handed to it before is written; ``drain_spool`` also replays its spool
    until ``deadline``. Done when the last lane passed."""

    def __init__(self, lanes: int, drain_spool: bool, deadline: float | None, on_passed: Callable[[], None]) -> None:
        self.drain_spool = drain_spool
        self.deadline = deadline
        self._handout = Handout(lanes, on_passed)

    def passed(self, lane: str) -> None:
        self._handout.finished(lane)


@dataclass
class _Stop:
    deadline: float | None = None


@dataclass
class _LaneState:
    jobs: deque[Any] = field(default_factory=deque)
    backlog_bytes: int = 0
    deadlines: list[float] = field(default_factory=list)


class SinkLane:
    """One sink's sender thread, with its own queue."""

    def __init__(
        self,
        slot: SinkSlot,
        *,
        recall: Callable[[list[SpooledRecord]], list[Any]],
        on_replayed: Callable[[], None],
        thread_name: str,
        max_backlog_deliveries: int = MAX_BACKLOG_DELIVERIES,
        max_backlog_bytes: int = MAX_BACKLOG_BYTES,
    ) -> None:
        self.slot = slot
        #: The lane whose outcome for a delivery this one waits for before writing it (a sink that writes only
        #: when another one cannot, e.g. the legacy table under ``sinks="traces"``).
        self.leader: SinkLane | None = None
        self._recall = recall
        self._on_replayed = on_replayed
        self._thread_name = thread_name
        self._max_deliveries = max_backlog_deliveries
        self._max_bytes = max_backlog_bytes
        self._init_runtime_state()

    def _init_runtime_state(self) -> None:
        self._state = _LaneState()
        self._cond = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None
        self._writing_records = 0
        self._writing_bytes = 0
        self._writing_since: float | None = None
        self.deferred_records = 0

    @property
    def linger_seconds(self) -> float:
        return float(getattr(self.slot.sink, "linger_seconds", 0.0) or 0.0)

    @property
    def max_write_bytes(self) -> int:
        """Estimated bytes one write packs at most: the lane's bound, or more for a sink that packs into large
        requests (``max_write_bytes`` on the sink: the sample table, under its rate limit)."""
        return max(self._max_bytes, int(getattr(self.slot.sink, "max_write_bytes", 0) or 0))

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- the uploader's side ---------------------------------------------------------------------

    def hand(self, delivery: Delivery, *, on_wait: Callable[[bool], None] | None = None) -> None:
        """Queue ``delivery``. When the backlog is full the caller waits for room (``on_wait`` is told when the wait
        starts and ends), unless the delivery is logged in the spool and the sink's write is slow: then it waits
        there for this lane's replay."""
        self._ensure_thread()
        can_defer = delivery.seqs is not None and self.slot.spool is not None
        with self._cond:
            if self._fits(delivery):
                self._queue(delivery)
                return
            if on_wait is not None:
                on_wait(True)
            try:
                while not self._fits(delivery) and self.alive:
                    if can_defer and self._write_is_slow():
                        self._defer(delivery)
                        return
                    self._cond.wait(_ROOM_SLICE_SECONDS if can_defer else 0.1)
                self._queue(delivery)
            finally:
                if on_wait is not None:
                    on_wait(False)

    def _write_is_slow(self) -> bool:
        since = self._writing_since
        return since is not None and time.monotonic() - since >= SLOW_WRITE_SECONDS

    def _fits(self, delivery: Delivery) -> bool:
        """Room behind the write under way: the lane's backlog and write stay within its bounds (or it is idle)."""
        state = self._state
        if not state.jobs and not self._writing_records:
            return True
        held = state.backlog_bytes + self._writing_bytes + delivery.estimated_bytes
        return len(state.jobs) < self._max_deliveries and held <= self.max_write_bytes

    def _queue(self, job: Any) -> None:
        state = self._state
        state.jobs.append(job)
        if isinstance(job, Delivery):
            state.backlog_bytes += job.estimated_bytes
        self._cond.notify_all()

    def _defer(self, delivery: Delivery) -> None:
        """The sink is far behind: the delivery waits in the spool (where it is logged) for this lane's replay."""
        assert self.slot.spool is not None and delivery.seqs is not None
        self.slot.spool.defer(self.slot.name, delivery.seqs)
        if not self.deferred_records:
            _logger.info(
                "the %s sink is behind by %d deliveries: new records wait in the spool for it",
                self.slot.name,
                len(self._state.jobs),
            )
        self.deferred_records += len(delivery.items)
        delivery.handout.finished(self.slot.name)

    def barrier(self, barrier: LaneBarrier) -> None:
        self._ensure_thread()
        with self._cond:
            if barrier.drain_spool and barrier.deadline is not None:
                self._state.deadlines.append(barrier.deadline)
            self._queue(barrier)

    def stop(self, deadline: float | None) -> None:
        """Write what is queued, then end; a deadline cuts retry and pacing waits short."""
        with self._cond:
            if deadline is not None:
                self._state.deadlines.append(deadline)
            self._queue(_Stop(deadline))

    def join(self, timeout: float | None) -> bool:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return not self.alive

    def abandon(self) -> int:
        """At the deadline, while the lane still writes: queued deliveries go to the spool when they are logged
        there; returns how many queued records could not be kept (counted as failed on the sink by the caller),
        plus the records of the write under way when there is no spool."""
        lost = self._writing_records if self.slot.spool is None else 0
        with self._cond:
            jobs, self._state.jobs = self._state.jobs, deque()
            self._state.backlog_bytes = 0
        for job in jobs:
            if isinstance(job, Delivery):
                if job.seqs is not None and self.slot.spool is not None:
                    self.slot.spool.defer(self.slot.name, job.seqs)
                else:
                    lost += len(job.items)
                job.handout.finished(self.slot.name)
            elif isinstance(job, LaneBarrier):
                job.passed(self.slot.name)
        return lost

    def _ensure_thread(self) -> None:
        if self._thread is not None:
            return
        with self._cond:
            if self._thread is None:
                thread = threading.Thread(target=self._work, name=self._thread_name, daemon=True)
                thread.start()
                self._thread = thread

    # -- the lane's thread ---------------------------------------------------------------------------

    def _work(self) -> None:
        token = SENDER_WAIT.set(self._wait)
        try:
            while True:
                job = self._next_job()
                if job is None:
                    self._replay_idle()
                elif isinstance(job, _Stop):
                    return
                elif isinstance(job, LaneBarrier):
                    self._pass(job)
                else:
                    self._write(self._gather(job))
        finally:
            SENDER_WAIT.reset(token)

    def _next_job(self) -> Any | None:
        """The next job, or None after ``IDLE_REPLAY_SECONDS`` without one (time to replay the spool)."""
        with self._cond:
            if not self._state.jobs:
                self._cond.wait(IDLE_REPLAY_SECONDS)
            if not self._state.jobs:
                return None
            return self._take()

    def _take(self) -> Any:
        state = self._state
        job = state.jobs.popleft()
        if isinstance(job, Delivery):
            state.backlog_bytes -= job.estimated_bytes
            self._writing_records += len(job.items)
            self._writing_bytes += job.estimated_bytes
            self._cond.notify_all()
        return job

    def _gather(self, first: Delivery) -> list[Delivery]:
        """``first`` and the deliveries of its kind queued behind it; a lingering sink waits up to its linger for
        more (anything else queued ends the wait at once)."""
        gathered = [first]
        records = len(first.items)
        until = time.monotonic() + self.linger_seconds
        most_bytes = self.max_write_bytes
        with self._cond:
            while records < MAX_LINGER_RECORDS:
                jobs = self._state.jobs
                if jobs and isinstance(jobs[0], Delivery) and jobs[0].kind == first.kind:
                    if self._writing_bytes + jobs[0].estimated_bytes > most_bytes:
                        break  # a full write: it goes now
                    delivery = self._take()
                    gathered.append(delivery)
                    records += len(delivery.items)
                    continue
                left = until - time.monotonic()
                if jobs or left <= 0:
                    break
                self._cond.wait(left)
        return gathered

    def _write(self, deliveries: list[Delivery]) -> None:
        items = [item for delivery in deliveries for item in delivery.items]
        with_seqs = all(delivery.seqs is not None for delivery in deliveries)
        seqs = [seq for delivery in deliveries for seq in delivery.seqs or ()] if with_seqs else None
        leader = self.leader
        if leader is not None:
            for delivery in deliveries:
                delivery.handout.wait_for(leader.slot.name)
        self._writing_since = time.monotonic()
        try:
            self.slot.dispatch(items, seqs)
        except Exception:
            _logger.exception("the %s sink raised unexpectedly; its lane continues", self.slot.name)
        finally:
            with self._cond:
                self._writing_records = self._writing_bytes = 0
                self._writing_since = None
                self._cond.notify_all()
            for delivery in deliveries:
                delivery.handout.finished(self.slot.name)
        if not self._state.jobs:
            self._replay(force=False)

    def _replay_idle(self) -> None:
        if self.slot.pending:
            self._replay(force=False)

    def replay_here(self, *, force: bool, deadline: float | None = None) -> None:
        """Replay on the caller's thread (only while this lane's thread is not running)."""
        self._replay(force=force, deadline=deadline)

    def _replay(self, *, force: bool, deadline: float | None = None) -> None:
        """Send this sink's spooled records while nothing new waits (with ``force``: until none is left or the
        deadline passes)."""
        if self.slot.spool is None:
            return
        while self.slot.pending:
            self._writing_since = time.monotonic()
            try:
                sent = self.slot.replay(self._recall, force=force)
            except Exception:
                _logger.exception("replaying the %s sink's spool failed", self.slot.name)
                break
            finally:
                self._writing_since = None
            if not sent or (deadline is not None and time.monotonic() > deadline):
                break
            if not force and self._state.jobs:
                break  # new records go first; the backlog resumes when the lane is idle again
        self._on_replayed()

    def _pass(self, barrier: LaneBarrier) -> None:
        try:
            if barrier.drain_spool:
                self._replay(force=True, deadline=barrier.deadline)
            if self.slot.sink.enabled:
                self.slot.sink.flush()
        except Exception:
            _logger.exception("flushing the %s sink failed", self.slot.name)
        finally:
            with self._cond:
                if barrier.deadline is not None and barrier.deadline in self._state.deadlines:
                    self._state.deadlines.remove(barrier.deadline)
            barrier.passed(self.slot.name)

    def _wait(self, seconds: float, sleep: Callable[[float], None]) -> bool:
        """``SENDER_WAIT`` on this lane: wait ``seconds`` unless that would outlast a finish deadline (also one
        that arrives while waiting)."""
        end = time.monotonic() + seconds
        if sleep is not time.sleep:
            if self._past_deadline(end):
                return False
            sleep(seconds)
            return True
        with self._cond:
            while True:
                if self._past_deadline(end):
                    return False
                left = end - time.monotonic()
                if left <= 0:
                    return True
                self._cond.wait(left)

    def _past_deadline(self, end: float) -> bool:
        deadlines = self._state.deadlines
        return bool(deadlines) and end > min(deadlines)

    def reset_after_fork(self) -> None:
        """In a forked child: the parent's queued deliveries are the parent's."""
        self._init_runtime_state()
