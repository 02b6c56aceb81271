"""Runs by ``run.id``: decoded requests routed to their run, back-pressure, and the reaper that closes runs
whose end (or lease) came."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource

from ._auth import ANONYMOUS
from ._defaults import DEFAULT_DRAIN_SECONDS, DEFAULT_LEASE_SECONDS
from ._ending import EndTracker
from ._otlp import Origin, rows_by_resource, spans_by_resource
from ._run import GatewayRun, RunState
from ._sinks import PipelineFactory

_logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 1
#: How long a closed run stays listed (and refuses late data) before it is forgotten.
CLOSED_RUN_MEMORY_SECONDS = 3600.0
_KINDS = ("eval", "train")
_MAX_MESSAGE_CHARS = 1000


class Saturated(Exception):
    """The gateway cannot take the request now (a run's queue is full, or it is stopping): retry later."""

    def __init__(self, reason: str, retry_after: int = RETRY_AFTER_SECONDS) -> None:
        super().__init__(f"{reason}; retry after {retry_after} s")
        self.retry_after = retry_after


@dataclass
class Outcome:
    """What became of one request: records rejected (OTLP ``partial_success``) and why."""

    rejected: int = 0
    reasons: list[str] = field(default_factory=list)

    def reject(self, count: int, reason: str) -> None:
        if count:
            self.rejected += count
            if reason not in self.reasons:
                self.reasons.append(reason)

    @property
    def message(self) -> str:
        return "; ".join(self.reasons)[:_MAX_MESSAGE_CHARS]


class RunRegistry:
    def __init__(
        self,
        factory: PipelineFactory,
        *,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        drain_seconds: float = DEFAULT_DRAIN_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._factory = factory
        self._lease_seconds = lease_seconds
        self._drain_seconds = drain_seconds
        self._clock = clock
        self._runs: dict[str, GatewayRun] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._reaper: threading.Thread | None = None
        self._closers: list[threading.Thread] = []

    # -- receiving -------------------------------------------------------------------------------

    def accept_traces(self, request: ExportTraceServiceRequest, sender: str = ANONYMOUS) -> Outcome:
        outcome = Outcome()
        groups = spans_by_resource(request)
        runs = self._runs_for(
            [group.origin for group in groups], outcome, [len(group.spans) for group in groups], sender
        )
        for group, run in zip(groups, runs, strict=True):
            if run is not None:
                outcome.reject(run.accept_spans(group.origin, group.spans), _closed_reason(run))
        self._wake.set()
        return outcome

    def accept_metrics(self, request: ExportMetricsServiceRequest, sender: str = ANONYMOUS) -> Outcome:
        outcome = Outcome()
        groups = rows_by_resource(request)
        runs = self._runs_for(
            [group.origin for group in groups], outcome, [len(group.rows) for group in groups], sender
        )
        for group, run in zip(groups, runs, strict=True):
            if run is not None:
                outcome.reject(run.accept_rows(group.origin, group.rows), _closed_reason(run))
        return outcome

    def _runs_for(
        self, origins: list[Origin], outcome: Outcome, sizes: list[int], sender: str
    ) -> list[GatewayRun | None]:
        """Each resource's run (opened on first sight, bound to ``sender``); ``Saturated`` before anything is taken
        if one is full. A run bound to another sender takes nothing from this one."""
        if self._stopping:
            raise Saturated("the gateway is stopping")
        runs: list[GatewayRun | None] = []
        for origin, size in zip(origins, sizes, strict=True):
            if origin.run_id is None:
                outcome.reject(size, "a resource without run.id (no run to deliver to)")
                runs.append(None)
            elif origin.kind not in _KINDS:
                outcome.reject(size, f"run {origin.run_id}: run.type must be eval or train, got {origin.kind!r}")
                runs.append(None)
            else:
                held = self._run(origin, sender)
                if held.sender != sender:
                    held.foreign += size
                    outcome.reject(size, f"run {origin.run_id} was opened under another token")
                    runs.append(None)
                else:
                    runs.append(held)
        for taken in runs:
            if taken is not None and taken.state is RunState.OPEN and taken.saturated:
                raise Saturated(f"run {taken.id} has more queued than its uploads keep up with")
        return runs

    def _run(self, origin: Origin, sender: str) -> GatewayRun:
        assert origin.run_id is not None and origin.kind is not None
        with self._lock:
            run = self._runs.get(origin.run_id)
            if run is None:
                pipeline = self._factory.open(origin.run_id, origin.kind, Resource(dict(origin.attributes)))
                tracker = EndTracker(self._lease_seconds, self._clock)
                run = GatewayRun(
                    origin.run_id, origin.kind, pipeline, tracker, drain_seconds=self._drain_seconds, sender=sender
                )
                self._runs[origin.run_id] = run
                _logger.info("run %s (%s): receiving", origin.run_id, origin.kind)
            return run

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
                self.reap()

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
            ending = run.due_ending()
            if ending is not None and run.begin_close():
                closer = threading.Thread(
                    target=run.close, args=(ending,), name=f"prime-otel-gateway-close-{run.id}", daemon=True
                )
                closer.start()
                with self._lock:
                    self._closers = [thread for thread in self._closers if thread.is_alive()] + [closer]

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking data, let closes in progress finish, and drain the open runs without closing them."""
        deadline = time.monotonic() + timeout
        self._stopping = True
        self._wake.set()
        if self._reaper is not None:
            self._reaper.join(timeout)
        with self._lock:
            runs, closers = list(self._runs.values()), list(self._closers)
        for run in runs:
            if run.state is RunState.OPEN:
                _logger.warning("run %s: the gateway stops before the run ended; left open on the platform", run.id)
                run.abandon(max(0.0, deadline - time.monotonic()))
        for closer in closers:
            closer.join(max(0.0, deadline - time.monotonic()))

    # -- status ----------------------------------------------------------------------------------

    def status(self, sender: str = ANONYMOUS) -> list[dict[str, Any]]:
        """The runs bound to ``sender``."""
        with self._lock:
            runs = [run for run in self._runs.values() if run.sender == sender]
        return [run.status() for run in runs]


def _closed_reason(run: GatewayRun) -> str:
    return f"run {run.id} is {run.state.value} on this gateway; its data is no longer taken"
