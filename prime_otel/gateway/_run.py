"""One run as the gateway holds it: replays deduplicated, records and step rows fed to its pipeline, and the
close (drain, then finalize once with the owner's status) when ``EndTracker`` says the run is over."""

from __future__ import annotations

import enum
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from .. import _conventions as conv
from .._types import RunStatus
from ..records import clean
from ._auth import ANONYMOUS
from ._ending import METRIC_ROWS, SPAN_KINDS, Ending, EndMarker, EndTracker
from ._envelope import Invalid
from ._otlp import Origin, ReceivedSpan, StepRow
from ._outcome import Outcome
from ._sinks import RunPipeline
from ._spans import ReceivedRecord

_logger = logging.getLogger(__name__)

#: Step rows queued for a run's metrics uploader above which the run answers 503.
MAX_QUEUED_METRIC_ROWS = 200


class RunState(str, enum.Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class GatewayRun:
    """A run's state on this gateway. ``accept_*`` run on request threads; ``close`` on a closer thread."""

    def __init__(
        self,
        run_id: str,
        kind: str,
        pipeline: RunPipeline,
        tracker: EndTracker,
        *,
        drain_seconds: float,
        sender: str = ANONYMOUS,
    ) -> None:
        self.id = run_id
        self.kind = kind
        #: The token fingerprint the run is bound to (the sender whose request opened it here).
        self.sender = sender
        #: Records other senders tried to write into this run (refused).
        self.foreign = 0
        #: Spans and metrics refused because they could not be read, by reason.
        self.invalid: Counter[str] = Counter()
        self.state = RunState.OPEN
        self.ending: Ending | None = None
        self.duplicates = 0
        self.rejected = 0
        self.finalize_error: str | None = None
        self.closed_at: float | None = None
        self._pipeline = pipeline
        self._tracker = tracker
        self._drain_seconds = drain_seconds
        self._seen_spans: set[bytes] = set()
        self._seen_rows: set[tuple[int, int | None, int]] = set()
        self._step_rows: dict[int, dict[str, float]] = {}
        self._lock = threading.Lock()

    @property
    def queued_bytes(self) -> int:
        return self._pipeline.processor.queued_bytes

    @property
    def saturated(self) -> bool:
        metrics = self._pipeline.metrics
        return self._pipeline.processor.saturated or (
            metrics is not None and metrics.queued_records >= MAX_QUEUED_METRIC_ROWS
        )

    # -- receiving -------------------------------------------------------------------------------

    def accept_spans(self, origin: Origin, spans: list[ReceivedSpan | Invalid], outcome: Outcome) -> None:
        """Take one resource's spans, each on its own: an unreadable record span or end marker is refused and
        counted invalid (with why) while its neighbours go on. A span id is remembered (replays of it dropped)
        only once its record was queued or its marker noted; records that could not be queued set
        ``outcome.retry``."""
        with self._lock:
            if self.state is not RunState.OPEN:
                self.rejected += len(spans)
                outcome.reject(len(spans), self._closed_reason())
                return
            self._tracker.touch(origin.rank, origin.world_size)
            batches: dict[str, list[tuple[bytes, ReceivedRecord]]] = {}
            markers: list[tuple[bytes, EndMarker]] = []
            taken: set[bytes] = set()
            for span in spans:
                if isinstance(span, Invalid):
                    self._refuse(span.reason, outcome)
                    continue
                if span.span_id in self._seen_spans or span.span_id in taken:
                    self.duplicates += 1
                    continue
                try:
                    if span.name in SPAN_KINDS:
                        batches.setdefault(span.name, []).append((span.span_id, _received(span)))
                    elif span.name == conv.RUN_END_SPAN:
                        markers.append((span.span_id, EndMarker.from_attributes(origin.rank, span.attributes)))
                except (ValueError, TypeError, RecursionError) as exc:
                    self._refuse(_reason(span.name, exc), outcome)
                    continue
                taken.add(span.span_id)
            for name, entries in batches.items():
                if self._pipeline.processor.offer(name, [record for _, record in entries]):
                    self._seen_spans.update(span_id for span_id, _ in entries)
                    self._tracker.count(origin.rank, SPAN_KINDS[name], len(entries))
                else:
                    outcome.retry = f"run {self.id} could not queue {len(entries)} records now"
            for span_id, marker in markers:
                self._seen_spans.add(span_id)
                if marker.summary_problem is not None:
                    self.invalid[marker.summary_problem] += 1
                self._tracker.mark(marker)
                _logger.info("run %s: rank %d ended %s", self.id, marker.rank, marker.status.value)

    def accept_rows(self, origin: Origin, rows: list[StepRow], invalid: list[Invalid], outcome: Outcome) -> None:
        """Take one resource's step rows: each step's keys are merged into one row, posted again when it grows;
        metrics that could not be read are refused and counted invalid."""
        with self._lock:
            if self.state is not RunState.OPEN:
                self.rejected += len(rows) + len(invalid)
                outcome.reject(len(rows) + len(invalid), self._closed_reason())
                return
            for problem in invalid:
                self._refuse(problem.reason, outcome)
            self._tracker.touch(origin.rank, origin.world_size)
            fresh = []
            for row in rows:
                key = (origin.rank, row.step, row.time_ns)
                if key in self._seen_rows:
                    self.duplicates += 1
                    continue
                self._seen_rows.add(key)
                fresh.append(row)
            self._tracker.count(origin.rank, METRIC_ROWS, len(fresh))
            metrics = self._pipeline.metrics
            if metrics is None:
                return
            for row in fresh:
                values: dict[str, Any] = dict(row.values)
                if row.step is not None:
                    merged = self._step_rows.setdefault(row.step, {})
                    merged.update(row.values)
                    values = {**merged, "step": row.step}
                values["_timestamp"] = row.time_ns / 1e9 if row.time_ns else time.time()
                metrics.submit(values)

    def _refuse(self, reason: str, outcome: Outcome) -> None:
        self.invalid[reason] += 1
        outcome.reject(1, f"run {self.id}: {reason}")

    def _closed_reason(self) -> str:
        return f"run {self.id} is {self.state.value} on this gateway; its data is no longer taken"

    # -- closing ---------------------------------------------------------------------------------

    def due_ending(self) -> Ending | None:
        return self._tracker.decide() if self.state is RunState.OPEN else None

    def begin_close(self) -> bool:
        """OPEN → CLOSING, once; from then on new data for the run is rejected."""
        with self._lock:
            if self.state is not RunState.OPEN:
                return False
            self.state = RunState.CLOSING
            return True

    def close(self, ending: Ending) -> None:
        """Drain the sinks, then close the run on the platform (only when an owner reported, or it crashed)."""
        _logger.info(
            "run %s: closing (%s) as %s", self.id, ending.reason, ending.status.value if ending.status else "left open"
        )
        self._drain(self._drain_seconds)
        if ending.status is not None:
            self._finalize(ending.status, ending)
        if ending.missing:
            _logger.warning("run %s: %d announced records never reached this gateway", self.id, ending.missing)
        self._finish(ending)

    def abandon(self, timeout: float) -> None:
        """Gateway shutdown: drain what arrived, leave the run open on the platform (its producers may live on)."""
        if self.begin_close():
            self._drain(timeout)
            self._finish(None)

    def _drain(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        self._pipeline.processor.close(timeout)
        if self._pipeline.metrics is not None:
            self._pipeline.metrics.close(max(0.0, deadline - time.monotonic()))

    def _finalize(self, status: RunStatus, ending: Ending) -> None:
        summary = self._with_invalid_records(clean(ending.summary or {}))
        traces = self._pipeline.traces
        if self.kind == "eval" and traces is not None:
            existing = summary.get("prime_runs")
            block = dict(existing) if isinstance(existing, Mapping) else {}
            block["traces_episodes_written"] = traces.episodes_written
            summary["prime_runs"] = block
        backend = self._pipeline.backend
        self._quietly("updating", lambda: backend.update(self.id, config=None, summary=summary or None))
        self._quietly(
            "finalizing",
            lambda: backend.finalize(self.id, status, summary=summary or None, error=ending.error, config=None),
        )

    def _with_invalid_records(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The summary with ``prime_runs.invalid_records`` (reason -> count) when this gateway refused any."""
        invalid = self.invalid_reasons()
        if invalid:
            existing = summary.get("prime_runs")
            block = dict(existing) if isinstance(existing, Mapping) else {}
            block["invalid_records"] = dict(invalid)
            summary["prime_runs"] = block
        return summary

    def _quietly(self, what: str, step: Callable[[], object]) -> None:
        try:
            step()
        except Exception as exc:
            self.finalize_error = f"{what}: {type(exc).__name__}: {exc}"
            _logger.warning("run %s: %s the run on the platform failed: %s", self.id, what, exc)

    def _finish(self, ending: Ending | None) -> None:
        for close in self._pipeline.closers:
            try:
                close()
            except Exception:
                _logger.exception("run %s: closing a client failed", self.id)
        with self._lock:
            self.ending = ending
            self.closed_at = time.monotonic()
            self.state = RunState.CLOSED
            self._seen_spans.clear()
            self._seen_rows.clear()
            self._step_rows.clear()

    # -- status ----------------------------------------------------------------------------------

    def invalid_reasons(self) -> Counter[str]:
        """Everything of this run refused as unreadable: spans and metrics on arrival, records on delivery."""
        # dict() copies in one step, while the uploader thread may be adding a reason.
        return Counter(dict(self.invalid)) + Counter(dict(self._pipeline.processor.invalid_reasons))

    def status(self) -> dict[str, Any]:
        pipeline = self._pipeline
        uploaders = [pipeline.processor, *([pipeline.metrics] if pipeline.metrics is not None else [])]
        ending = self.ending
        invalid = self.invalid_reasons()
        return {
            "run_id": self.id,
            "kind": self.kind,
            "state": self.state.value,
            "status": ending.status.value if ending is not None and ending.status is not None else None,
            "error": ending.error if ending is not None else None,
            "reason": ending.reason if ending is not None else None,
            "missing": ending.missing if ending is not None else None,
            "finalize_error": self.finalize_error,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "foreign": self.foreign,
            "dropped": sum(uploader.dropped_records for uploader in uploaders),
            "invalid": sum(invalid.values()),
            "invalid_reasons": dict(invalid),
            "sinks": {
                slot.name: {
                    "delivered": slot.exporter.stats.delivered,
                    "failed": slot.failed,
                    "skipped": slot.exporter.stats.skipped,
                }
                for uploader in uploaders
                for slot in uploader.slots
            },
            **self._tracker.snapshot(),
        }


def _reason(name: str, error: BaseException) -> str:
    if isinstance(error, ValueError) and name == conv.RUN_END_SPAN and str(error).startswith("a run.end"):
        return str(error)
    return f"a {name} span whose record cannot be read ({type(error).__name__})"


def _received(span: ReceivedSpan) -> ReceivedRecord:
    record = span.attributes.get(conv.RECORD_JSON)
    if not isinstance(record, str):
        # A plain-API producer may carry the record as a map attribute instead of a JSON string.
        mapping = span.attributes.get(conv.RECORD_MAP)
        record = json.dumps(mapping, ensure_ascii=False) if isinstance(mapping, Mapping) else ""
    samples = span.attributes.get(conv.SAMPLES_JSON)
    return ReceivedRecord(
        name=span.name,
        record_json=record,
        samples_json=samples if isinstance(samples, str) else None,
        end_time_ns=span.end_time_ns,
    )
