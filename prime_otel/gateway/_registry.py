"""Runs by ``run.id``: decoded requests routed to their run, back-pressure, and the reaper that closes runs
whose end (or lease) came."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from typing import Any

from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.resources import Resource

from .._types import RunKind, run_kind_of
from ._auth import ANONYMOUS
from ._defaults import DEFAULT_DRAIN_SECONDS, DEFAULT_LEASE_SECONDS
from ._ending import Ending, EndTracker
from ._envelope import Envelope
from ._limits import GatewayLimits
from ._otlp import Origin, ResourceRows, ResourceSpans, rows_by_resource, spans_by_resource
from ._outcome import Outcome, Saturated
from ._run import GatewayRun, RunState
from ._sinks import PipelineFactory
from ._state import GatewayState

_logger = logging.getLogger(__name__)

#: How long a closed run stays listed (and refuses late data) before it is forgotten.
CLOSED_RUN_MEMORY_SECONDS = 3600.0
_CLOSERS = 4


class RunRegistry:
    def __init__(
        self,
        factory: PipelineFactory,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        drain_seconds: float = DEFAULT_DRAIN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        limits: GatewayLimits | None = None,
        state: GatewayState | None = None,
    ) -> None:
        self._factory = factory
        self._state = state
        #: Runs a previous life of this gateway closed (from ``state``): their late data stays refused.
        self._closed_before: set[str] = set()
        self._limits = limits or GatewayLimits()
        self._lease_seconds = lease_seconds
        self._drain_seconds = drain_seconds
        self._clock = clock
        self._runs: dict[str, GatewayRun] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._reaper: threading.Thread | None = None
        # A few closes at once; each mostly waits on its run's deliveries and the platform.
        self._closer = futures.ThreadPoolExecutor(max_workers=_CLOSERS, thread_name_prefix="prime-otel-gateway-close")
        self._closes: list[futures.Future[None]] = []

    # -- receiving -------------------------------------------------------------------------------

    def accept_traces(self, envelopes: list[Envelope[Span]], sender: str = ANONYMOUS) -> Outcome:
        """Route each resource's spans to its run. Spans that could not be read are refused (counted invalid on
        their run); ``Saturated`` when a run is full, or some records could not be queued (the sender retries)."""
        outcome = Outcome()
        groups = spans_by_resource(envelopes)
        runs = self._runs_for(groups, outcome, [len(group.spans) for group in groups], sender)
        for group, run in zip(groups, runs, strict=True):
            if run is not None and group.origin is not None:
                run.accept_spans(group.origin, group.spans, outcome)
        self._wake.set()
        if outcome.retry:
            raise Saturated(outcome.retry)
        return outcome

    def accept_metrics(self, envelopes: list[Envelope[Metric]], sender: str = ANONYMOUS) -> Outcome:
        outcome = Outcome()
        groups = rows_by_resource(envelopes)
        runs = self._runs_for(groups, outcome, [len(group.rows) + len(group.invalid) for group in groups], sender)
        for group, run in zip(groups, runs, strict=True):
            if run is not None and group.origin is not None:
                run.accept_rows(group.origin, group.rows, group.invalid, outcome)
        if outcome.retry:
            raise Saturated(outcome.retry)
        return outcome

    def _runs_for(
        self, groups: Sequence[ResourceSpans | ResourceRows], outcome: Outcome, sizes: list[int], sender: str
    ) -> list[GatewayRun | None]:
        """Each resource's run (opened on first sight, bound to ``sender``); ``Saturated`` before anything is taken
        if one is full. A run bound to another sender takes nothing from this one."""
        if self._stopping:
            raise Saturated("the gateway is stopping")
        runs: list[GatewayRun | None] = []
        for group, size in zip(groups, sizes, strict=True):
            origin = group.origin
            if origin is None:
                outcome.reject(size, f"a resource that cannot be read: {group.problem}")
                runs.append(None)
            elif origin.run_id is None:
                outcome.reject(size, "a resource without run.id (no run to deliver to)")
                runs.append(None)
            elif origin.run_kind is None:
                outcome.reject(size, f"run {origin.run_id}: run.type must be eval or train, got {origin.kind!r}")
                runs.append(None)
            elif origin.run_id in self._closed_before and origin.run_id not in self._runs:
                outcome.reject(size, f"run {origin.run_id} was closed by this gateway; its data is no longer taken")
                runs.append(None)
            elif origin.world_size > self._limits.max_world_size:
                cap = self._limits.max_world_size
                outcome.reject(size, f"run {origin.run_id}: a world size or rank above this gateway's cap of {cap}")
                runs.append(None)
            else:
                held = self._run(origin, sender)
                if held.sender != sender:
                    held.note_foreign(size)
                    outcome.reject(size, f"run {origin.run_id} was opened under another token")
                    runs.append(None)
                else:
                    runs.append(held)
        for taken in runs:
            if taken is not None and taken.state is RunState.OPEN and taken.saturated:
                raise Saturated(f"run {taken.id} has more queued than its uploads keep up with")
        if any(taken is not None for taken in runs) and self.queued_bytes() >= self._limits.max_queued_bytes:
            raise Saturated("the gateway has more queued than its uploads keep up with")
        return runs

    def queued_bytes(self) -> int:
        with self._lock:
            runs = list(self._runs.values())
        return sum(run.queued_bytes for run in runs if run.state is not RunState.CLOSED)

    def _run(self, origin: Origin, sender: str) -> GatewayRun:
        kind = origin.run_kind
        assert origin.run_id is not None and kind is not None
        with self._lock:
            run = self._runs.get(origin.run_id)
            if run is None:
                open_runs = sum(1 for held in self._runs.values() if held.state is not RunState.CLOSED)
                if open_runs >= self._limits.max_open_runs:
                    raise Saturated(f"the gateway holds {open_runs} open runs, its cap")
                run = self._new_run(origin.run_id, kind, origin.attributes, sender)
                if self._state is not None:
                    self._state.opened(origin.run_id, kind, sender, origin.attributes)
                self._runs[origin.run_id] = run
                _logger.info("run %s (%s): receiving", origin.run_id, kind)
            return run

    def _new_run(self, run_id: str, kind: RunKind, resource: Mapping[str, Any], sender: str) -> GatewayRun:
        pipeline = self._factory.open(run_id, kind, Resource(dict(resource)))
        tracker = EndTracker(self._lease_seconds, self._clock)
        return GatewayRun(
            run_id, kind, pipeline, tracker, drain_seconds=self._drain_seconds, sender=sender, state=self._state
        )

    def restore(self) -> None:
        """After a restart on the same state folder: every run open before is taken up where it was (its records
        not yet delivered are queued again); runs closed before keep refusing late data."""
        if self._state is None:
            return
        for stored in self._state.runs():
            if stored.closed:
                self._closed_before.add(stored.run_id)
                continue
            kind = run_kind_of(stored.kind)
            if kind is None:
                _logger.warning(
                    "run %s: its stored kind %r names no run kind; not taken up", stored.run_id, stored.kind
                )
                continue
            run = self._new_run(stored.run_id, kind, stored.resource, stored.sender)
            with self._lock:
                self._runs[stored.run_id] = run
            requeued = run.restore(stored)
            _logger.info("run %s (%s): taken up after a restart, %d records queued again", run.id, run.kind, requeued)

    # -- closing ---------------------------------------------------------------------------------

    def start(self) -> None:
        thread = threading.Thread(target=self._reap_forever, name="prime-otel-gateway-reaper", daemon=True)
        thread.start()
        self._reaper = thread

    def _reap_forever(self) -> None:
        tick = min(0.5, self._lease_seconds / 4)
        while not self._stopping:
            self._wake.wait(tick)
            self._wake.clear()
            if not self._stopping:
                try:
                    self.reap()
                except Exception:  # one run's failure must not stop the closing of every other run
                    _logger.exception("reaping runs failed; the reaper goes on")

    def reap(self) -> None:
        """Start closing every run whose ending is due; forget runs closed long ago."""
        forget_before = time.monotonic() - CLOSED_RUN_MEMORY_SECONDS
        with self._lock:
            for run_id in [
                i for i, run in self._runs.items() if run.closed_at is not None and run.closed_at < forget_before
            ]:
                del self._runs[run_id]
            runs = list(self._runs.values())
        for run in runs:
            try:
                ending = run.due_ending()
            except Exception:
                _logger.exception("run %s: deciding its end failed", run.id)
                continue
            if ending is not None and run.begin_close():
                close = self._closer.submit(_close_guarded, run, ending)
                with self._lock:
                    self._closes = [pending for pending in self._closes if not pending.done()] + [close]

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking data, let closes in progress finish, and drain the open runs without closing them."""
        deadline = time.monotonic() + timeout
        self._stopping = True
        self._wake.set()
        if self._reaper is not None:
            self._reaper.join(timeout)
        with self._lock:
            runs, closes = list(self._runs.values()), list(self._closes)
        for run in runs:
            if run.state is RunState.OPEN:
                _logger.warning("run %s: the gateway stops before the run ended; left open on the platform", run.id)
                run.abandon(max(0.0, deadline - time.monotonic()))
        futures.wait(closes, max(0.0, deadline - time.monotonic()))
        self._closer.shutdown(wait=False)

    # -- status ----------------------------------------------------------------------------------

    def status(self, sender: str = ANONYMOUS) -> list[dict[str, Any]]:
        """The runs bound to ``sender``."""
        with self._lock:
            runs = [run for run in self._runs.values() if run.sender == sender]
        return [run.status() for run in runs]


def _close_guarded(run: GatewayRun, ending: Ending) -> None:
    try:
        run.close(ending)
    except Exception:
        _logger.exception("run %s: closing failed", run.id)
