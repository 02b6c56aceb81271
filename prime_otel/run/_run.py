"""The ``Run`` handle: logging calls on the producer's thread, and one teardown that closes the run once."""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import Tracer

from .._backends import ClosedAs, RunBackend, close_run
from .._files import write_json_atomically
from .._fork import register_for_fork_reset
from .._throttle import ThrottledWarning
from .._types import CONFIG_SOURCE_KEY, ConfigSource, RunKind, RunMode, RunStatus
from ..client import PlatformHTTP
from ..errors import RunFinishedError
from ..exporters.otlp import OtlpRecordSink
from ..exporters.traces import PrimeTracesSink
from ..offline._writer import RUN_FILE, OfflineRunWriter
from ..processors import RecordProcessor, RunLifecycleProcessor, StepMetricsUploader, Uploader
from ..records import clean, loggable, metric_row
from ..resources import RunIdentity
from ._admission import Admission
from ._containment import ErrorNotes, describe
from ._exit_paths import SIGNALS, AtexitHook, exit_status
from ._join import RunHandle
from ._membership import Membership, RunMarker, membership_of
from ._open_runs import OPEN_RUNS, OpenRun
from ._report import Closure, DeliveryReport, WorkerTally
from ._sink_reports import offline_sink_report, sink_reports, warn_losses
from ._status_line import Progress, StatusLine
from ._worker_exit import drain_at_worker_exit, follow_into_forked_workers

_logger = logging.getLogger("prime_otel")

DEFAULT_FINISH_TIMEOUT_SECONDS = 300.0
CRASH_MESSAGE = "process exited without finishing the run"
# A finish() that finds another thread finishing waits this much longer than the budget it was given.
_FINISH_WAIT_MARGIN_SECONDS = 5.0
REPORT_FILE = "report.json"
_CLOSURE_OF = {
    ClosedAs.CONFIRMED: Closure.CONFIRMED,
    ClosedAs.RECORDED_IN_METADATA: Closure.RECORDED_IN_METADATA,
    ClosedAs.LEFT_TO_LAUNCHER: Closure.LEFT_TO_LAUNCHER,
}


@dataclass
class RunParts:
    """Everything ``init()`` assembled for one run."""

    identity: RunIdentity
    mode: RunMode
    url: str | None
    attached: bool
    owns_lifecycle: bool
    config: dict[str, Any]
    notes: ErrorNotes
    finish_timeout: float = DEFAULT_FINISH_TIMEOUT_SECONDS
    backend: RunBackend | None = None
    processor: RecordProcessor | None = None
    metrics: StepMetricsUploader | None = None
    end_marker: OtlpRecordSink | None = None
    http: PlatformHTTP | None = None
    run_folder: Path | None = None
    tracer_provider: TracerProvider | None = None
    offline: OfflineRunWriter | None = None
    #: The run's folder on this machine (``<runs folder>/<run id>``), where owner and workers coordinate.
    local_folder: Path | None = None
    #: The owner's open marker (owner only), or this joined process's membership of the run (workers only).
    marker: RunMarker | None = None
    membership: Membership | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)
    print_report: bool = True
    #: What ``prime-otel sync`` needs to close this run later (owner, direct transport); written to
    #: ``sync_folder`` at init when the run keeps a spool, otherwise only when closing was not confirmed.
    sync_document: dict[str, Any] | None = None
    sync_folder: Path | None = None
    #: Show the live status line (online runs, interactive stderr only).
    status_line: bool = False
    #: Where spans ended outside the run's provider go when the run has no records processor (offline runs).
    record_spans: SpanProcessor | None = None


def coerce_status(status: RunStatus | str) -> RunStatus:
    try:
        coerced = RunStatus(status)
    except ValueError:
        raise ValueError(f"unknown run status {status!r}; use one of {[s.value for s in RunStatus]}") from None
    if coerced is RunStatus.RUNNING:
        raise ValueError("finish() requires a terminal status, got 'running'")
    return coerced


class Run:
    """One run on the Prime platform. Create it with ``prime_otel.init()``; in worker processes reach it with
    ``prime_otel.join(run.handle)`` (or a plain ``init()``, which joins the owner's open run of its kind).

    Every method is safe from any thread. ``log_*`` calls are either accepted (and delivered, or counted in the
    report) or refused with ``RunFinishedError`` once ``finish()`` began, here or (for a joined process) by the
    run's owner. Only the owner closes the run; a joined process drains what it logged when it ends. See
    docs/workers-and-signals.md for signals and worker pools."""

    def __init__(self, parts: RunParts) -> None:
        self._parts = parts
        self.config: dict[str, Any] = dict(parts.config)
        self.summary: dict[str, Any] = {}
        self.status = RunStatus.RUNNING
        self._finishing = False
        self._finished = False
        self._owns_lifecycle = parts.owns_lifecycle
        self._state_lock = threading.RLock()
        self._admission = Admission()
        self._finish_token = threading.Lock()  # taken once, by the one finish() that tears the run down
        self._done = threading.Event()
        self._finishing_thread: int | None = None
        self._flush_warning = ThrottledWarning(_logger)
        self._report: DeliveryReport | None = None
        self._final_error: str | None = None
        self._deadline: float | None = None
        self._closure = Closure.OPEN
        self._close_error: str | None = None
        if parts.tracer_provider is not None:
            parts.tracer_provider.add_span_processor(RunLifecycleProcessor(self._close_run))
        self._status_line = StatusLine(parts.identity.id, self._progress)
        if parts.mode == "online" and parts.status_line:
            self._status_line.start()
        self._workers = WorkerTally()
        self._progress_of_worker: Callable[[], dict[str, Any]] = dict
        self._dropped_at_join = 0
        self._atexit: AtexitHook | None = None
        if parts.mode != "disabled":
            self._atexit = AtexitHook(self._on_exit)
            SIGNALS.register(self)
            follow_into_forked_workers(self, Run._on_exit)
            if parts.owns_lifecycle:
                if parts.local_folder is not None:
                    OPEN_RUNS.opened(self._open_run_entry(), parts.local_folder.parent, self)
            else:
                drain_at_worker_exit(self._on_exit)
                self._follow_membership()
        register_for_fork_reset(self)

    # -- identity --------------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self._parts.identity.id

    @property
    def name(self) -> str | None:
        return self._parts.identity.name

    @property
    def kind(self) -> RunKind:
        return self._parts.identity.kind

    @property
    def mode(self) -> RunMode:
        return self._parts.mode

    @property
    def url(self) -> str | None:
        return self._parts.url

    @property
    def attached(self) -> bool:
        return self._parts.attached

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def still_open(self) -> bool:
        """Not finished here, and (in a joined process) not closed by its owner."""
        membership = self._parts.membership
        return not (self._finishing or self._finished) and (membership is None or membership.open)

    @property
    def handle(self) -> RunHandle:
        """A small picklable value naming this run; pass it to workers, which call ``prime_otel.join(handle)``."""
        folder = self._parts.local_folder
        return RunHandle(id=self.id, kind=self.kind, mode=self.mode, folder=str(folder) if folder else "")

    @property
    def workers(self) -> WorkerTally:
        """What worker processes logged into this run (final once the owner finished it)."""
        marker = self._parts.marker
        return marker.tally() if marker is not None and not self._finished else self._workers

    def _open_run_entry(self) -> OpenRun:
        return OpenRun(id=self.id, kind=self.kind, mode=self.mode, folder=str(self._parts.local_folder))

    def _follow_membership(self) -> None:
        """A joined process reports its progress to the owner after each log call and each delivery."""
        membership = self._parts.membership
        if membership is None:
            return
        baseline = self._delivered_per_sink()
        self._dropped_at_join = sum(uploader.dropped_records for uploader in self._uploaders)
        self._progress_of_worker = lambda: self._worker_progress(baseline)
        membership.follow(self._progress_of_worker)
        for uploader in self._uploaders:
            uploader.on_settled = membership.report
        membership.report()

    def _delivered_per_sink(self) -> dict[str, tuple[int, int]]:
        """Per record sink: (delivered, failed)."""
        counts = {}
        if self._parts.processor is not None:
            for slot in self._parts.processor.slots:
                counts[slot.name] = (slot.sink.stats.delivered, slot.failed)
        if self._parts.offline is not None:
            counts["offline"] = (self._parts.offline.records_written, self._parts.offline.failed)
        return counts

    def _worker_progress(self, baseline: Mapping[str, tuple[int, int]]) -> dict[str, Any]:
        """Counted from what this process's sinks had done when it joined (a forked child inherits counts)."""
        sinks = {
            name: {
                "delivered": delivered - baseline.get(name, (0, 0))[0],
                "failed": failed - baseline.get(name, (0, 0))[1],
            }
            for name, (delivered, failed) in self._delivered_per_sink().items()
        }
        dropped = sum(uploader.dropped_records for uploader in self._uploaders) - self._dropped_at_join
        return {
            "queued": sum(uploader.queued_records for uploader in self._uploaders),
            "dropped": dropped,
            "sinks": sinks,
        }

    @property
    def folder(self) -> str | None:
        """The run's folder in offline mode."""
        return str(self._parts.offline.folder) if self._parts.offline else None

    @property
    def config_source(self) -> ConfigSource | None:
        source = self.config.get(CONFIG_SOURCE_KEY)
        return ConfigSource.from_mapping(source) if isinstance(source, Mapping) else None

    @property
    def tracer_provider(self) -> TracerProvider | None:
        """The run's private provider: spans named ``episode``/``trace`` created with it become platform records."""
        return self._parts.tracer_provider

    def tracer(self, name: str = "prime_otel.producer") -> Tracer | None:
        provider = self._parts.tracer_provider
        return provider.get_tracer(name) if provider is not None else None

    def meter(self, name: str = "prime_otel.producer") -> Meter | None:
        """A meter of the run's provider (training runs): what its instruments measure lands in the step's row."""
        metrics = self._parts.metrics
        return metrics.meter_provider.get_meter(name) if metrics is not None else None

    @property
    def meter_provider(self) -> MeterProvider | None:
        metrics = self._parts.metrics
        return metrics.meter_provider if metrics is not None else None

    def ingest_span(self, span: ReadableSpan) -> None:
        """Take an ``episode``/``trace`` span ended outside the run's provider (another processor's export)."""
        receiver = self._parts.processor or self._parts.record_spans
        if receiver is not None and not (self._finishing or self._finished):
            receiver.on_end(span)

    @property
    def _uploaders(self) -> list[Uploader]:
        return [u for u in (self._parts.processor, self._parts.metrics) if u is not None]

    @property
    def errors(self) -> list[str]:
        """Contained failures, each distinct text once (with a count when it repeated)."""
        return self._parts.notes.errors

    @property
    def dropped_records(self) -> int:
        """Records that reached no sink (the queue was full and the spool could not keep them)."""
        return sum(uploader.dropped_records for uploader in self._uploaders)

    @property
    def failed_records(self) -> dict[str, int]:
        """Per sink, records not known to be stored: failed, or possibly missing after an ambiguous failure.
        Once the run is finished this also counts what is still in the spool: those records are not on the
        platform (a later ``prime-otel sync`` may deliver them; ``report`` tells the kinds apart)."""
        if self._report is not None:
            counts = {s.sink: s.failed + s.possibly_missing + s.pending for s in self._report.sinks}
            return {sink: count for sink, count in counts.items() if count}
        counts = {}
        for uploader in self._uploaders:
            for slot in uploader.slots:
                missing = len(slot.spool.sink(slot.name).missing) if slot.spool is not None else 0
                if slot.failed + missing:
                    counts[slot.name] = slot.failed + missing
        return counts

    def __repr__(self) -> str:
        return f"<Run id={self.id!r} mode={self.mode!r} status={self.status.value}>"

    # -- logging ---------------------------------------------------------------------------------

    def log_episodes(self, episodes: Iterable[Any]) -> None:
        """Queue episodes for every sink; cheap on the caller's thread (blocks at most 5 s when the queue is full).

        A list of verifiers ``Episode`` objects or mappings (each with a string ``id``). Anything else, or a mapping
        without an id, raises ``TypeError``/``ValueError`` naming its position, and nothing of the call is queued.
        A record that later proves unusable (not JSON, over a Prime Traces limit) is counted as failed with the
        reason in ``failed_records`` and ``report``; the other records of the call are delivered."""
        self._log("log_episodes", episodes)

    def log_traces(self, traces: Iterable[Any]) -> None:
        """Queue bare traces (same mechanics as ``log_episodes``)."""
        self._log("log_traces", traces)

    def _log(self, operation: str, records: Iterable[Any]) -> None:
        self._check_live(operation)
        batch = loggable(operation, records)
        with self._admitted(operation, len(batch)):
            if not batch:
                return
            if self._parts.offline is not None:
                self._parts.offline.write_records(operation, batch)
            elif self._parts.processor is not None:
                self._parts.processor.submit(batch)

    @contextlib.contextmanager
    def _admitted(self, operation: str, records: int) -> Iterator[None]:
        """One log call, admitted before ``finish()`` began (here, or by the owner of a joined run) or refused:
        ``finish()`` waits for the calls it admitted."""
        if not self._admission.enter():
            self._check_live(operation)
            raise RunFinishedError(f"{operation}() was called on run {self.id}, which is already finished.")
        try:
            membership = self._parts.membership
            with membership.admitting(records) if membership is not None else contextlib.nullcontext():
                yield
        finally:
            self._admission.leave()

    def log_metrics(self, values: Mapping[str, Any], *, step: int | None = None) -> None:
        """Per-step training metrics; a no-op on eval runs.

        Values must be numbers: ints, floats, bools (stored as 1 or 0), numpy scalars and 0-d arrays (converted to
        plain ints and floats) or ``None``; NaN and ±inf are stored as null. ``step`` (or a ``"step"`` key, which
        wins) must be an integer from 0 to 2**53 - 1. Anything else raises ``TypeError`` or ``ValueError`` naming
        the key, and nothing of that call is queued.
        """
        self._check_live("log_metrics")
        if self.kind != "train":
            return
        row: dict[str, Any] = metric_row(values, step)
        row.setdefault("_timestamp", time.time())
        with self._admitted("log_metrics", 0):
            if self._parts.offline is not None:
                self._parts.offline.write_metrics(row)
            elif self._parts.metrics is not None:
                self._parts.metrics.submit(row)

    def update_summary(self, values: Mapping[str, Any]) -> None:
        with self._state_lock:
            self._check_live("update_summary")
            self.summary.update(clean(values))

    def _check_live(self, operation: str) -> None:
        if self._finishing or self._finished:
            raise RunFinishedError(
                f"{operation}() was called on run {self.id}, which is already finished. "
                "Open a new run with prime_otel.init() to keep logging."
            )

    # -- flush and finish ------------------------------------------------------------------------

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until everything logged so far was written; False when ``timeout`` passed first. Safe from any
        thread: while ``finish()`` runs elsewhere it waits for that finish (whose budget bounds it), and returns
        as soon as everything is settled."""
        if self._finishing or self._finished:
            drained = self._await_finish(timeout)
        else:
            deadline = None if timeout is None else time.monotonic() + timeout
            if self._parts.metrics is not None:
                with contextlib.suppress(Exception):  # a finish on another thread may close the reader meanwhile
                    self._parts.metrics.collect()
            left = [uploader.flush(None if deadline is None else _left(deadline)) for uploader in self._uploaders]
            drained = all(left)
        if not drained:
            self._flush_warning.warn("Run %s: flush did not drain within %s s", self.id, timeout)
        self._parts.notes.raise_held()
        return drained

    def _await_finish(self, timeout: float | None) -> bool:
        """Waits for a finish under way on another thread (never for one this thread is inside: a signal handler
        interrupting it); at most ``timeout``, or the run's finish budget (plus a margin) when it is None."""
        if self._finishing_thread == threading.get_ident():
            return self._finished
        if timeout is None:
            timeout = self._parts.finish_timeout + _FINISH_WAIT_MARGIN_SECONDS
        return self._done.wait(max(0.0, timeout))

    def finish(
        self,
        summary: Mapping[str, Any] | None = None,
        *,
        status: RunStatus | str = RunStatus.COMPLETED,
        error: str | None = None,
        timeout: float | None = None,
    ) -> DeliveryReport:
        """Drain, close the run on the platform with ``status``, and report what was delivered. Idempotent; a call
        while another thread finishes waits for that finish (bounded by ``timeout`` or the run's budget). The owner
        first stops its workers from logging and waits, within the budget, for what they logged."""
        target = coerce_status(status)
        # The whole call is a closing: a termination signal arriving on this thread meanwhile (even before the
        # teardown began) waits for it instead of ending the process in the middle of it.
        with SIGNALS.closing():
            # A non-blocking acquire is atomic, also against a signal handler finishing on this very thread.
            if not self._finish_token.acquire(blocking=False):
                # Another thread is finishing (or did): wait for it, bounded, so the caller sees the final report.
                self._await_finish(timeout)
                return self.report
            self._finishing_thread = threading.get_ident()
            self._finishing = True
            try:
                budget = self._parts.finish_timeout if timeout is None else max(0.0, timeout)
                self._admission.close(budget)
                self._teardown(target, summary, error, timeout)
            finally:
                self._finished = True
                self._done.set()
        self._parts.notes.raise_held()
        return self.report

    def fail(self, error: BaseException | str, *, timeout: float | None = None) -> DeliveryReport:
        return self.finish(status=RunStatus.FAILED, error=describe(error), timeout=timeout)

    @property
    def report(self) -> DeliveryReport:
        """What each sink delivered so far (final once the run finished)."""
        return self._report or self._build_report()

    def _progress(self) -> Progress:
        slots = [slot for uploader in self._uploaders for slot in uploader.slots]
        return Progress(
            sent=max((slot.sink.stats.delivered for slot in slots), default=0),
            queued=sum(uploader.queued_records for uploader in self._uploaders),
            spooled=sum(slot.pending for slot in slots),
            failed=sum(self.failed_records.values()) + self.dropped_records,
        )

    def _teardown(
        self, status: RunStatus, summary: Mapping[str, Any] | None, error: str | None, timeout: float | None
    ) -> None:
        parts = self._parts
        if summary:
            self.summary.update(clean(summary))
        self.status = status
        budget = parts.finish_timeout if timeout is None else max(0.0, timeout)
        deadline = time.monotonic() + budget
        if self._owns_lifecycle:
            self._close_to_workers(deadline)
        if parts.metrics is not None:
            parts.metrics.collect()
        drained = all([uploader.flush(_left(deadline), drain_spool=True) for uploader in self._uploaders])
        if not drained:
            _logger.warning(
                "Run %s: uploads did not drain within %.0f s; the run is finalized anyway, the rest counted as lost "
                "(or kept in the spool for prime-otel sync)",
                self.id,
                budget,
            )
        if parts.metrics is not None:
            parts.metrics.close(_left(deadline))
        self._final_error = error
        self._deadline = deadline
        if parts.processor is not None:
            parts.processor.shutdown_timeout = _left(deadline)
        if parts.tracer_provider is not None:
            # Shuts the record processor down (drain, close), then the lifecycle processor closes the run.
            parts.tracer_provider.shutdown()
        else:
            self._close_run()
        for close in parts.closers:
            self._quietly("closing a client", close)
        if self._atexit is not None:
            self._atexit.unregister()
        SIGNALS.unregister(self)
        if parts.membership is not None and parts.membership.mine:
            parts.membership.leave(self._progress_of_worker)
            parts.membership.report()
        if parts.marker is not None:
            self._workers = parts.marker.tally()
        self._status_line.stop()
        if parts.mode == "disabled":
            self._closure = Closure.NOT_TRACKED
        if self._closure is Closure.NOT_CONFIRMED and parts.run_folder is None:
            self._quietly("writing the run folder for prime-otel sync", self._write_sync_folder, surface=False)
        self._report = self._build_report(final=True)
        if parts.run_folder is not None and self._owns_lifecycle:
            # The run's folder holds the owner's report; a worker's part is in its report under workers/.
            self._quietly("writing the delivery report", self._write_report_files, surface=False)
            self._quietly("removing the delivered run's folder", self._remove_delivered_folder, surface=False)
        warn_losses(self.id, self.dropped_records, self._report)
        if parts.print_report and parts.mode != "disabled":
            print(self._report.render(), file=sys.stderr)

    def _close_to_workers(self, deadline: float) -> None:
        """First of all: no process joins or logs into the run any more; then wait for what workers logged."""
        marker = self._parts.marker
        if marker is not None:
            marker.close()
        OPEN_RUNS.closed(self.id)
        if marker is not None and not marker.wait_for_workers(deadline):
            _logger.warning("Run %s: worker processes were still sending at the deadline", self.id)

    def _close_run(self) -> None:
        marker = self._parts.end_marker
        if marker is not None:
            # On the OTLP path the gateway closes the run once every process's records arrived.
            self._send_end_marker(marker)
        elif self._owns_lifecycle:
            http = self._parts.http
            # The finish budget bounds the closing calls too: no retry waits past it (one attempt always goes).
            bounded = (
                http.retries_until(self._deadline)
                if http is not None and self._deadline is not None
                else contextlib.nullcontext()
            )
            with bounded:
                self._close_on_platform(self.status, self._final_error)
        else:
            self._closure = Closure.LEFT_TO_OWNER

    def _close_on_platform(self, status: RunStatus, error: str | None) -> None:
        parts = self._parts
        offline = parts.offline
        if offline is not None:
            try:
                offline.write_run_document(self._offline_document(status, error))
            except Exception as exc:
                self._parts.notes.note("writing the run's status to its folder", exc, surface=False)
                self._settle_closure(Closure.NOT_CONFIRMED, describe(exc))
            else:
                self._settle_closure(Closure.WRITTEN_TO_FOLDER)
            return
        backend = parts.backend
        if backend is None:
            return
        summary = self._summary_for_platform()
        self.summary.update(summary)  # the run's summary is what the platform got, ``prime_runs`` block included
        try:
            closed = close_run(
                backend,
                self.id,
                status,
                summary=summary,
                error=error or self._parts.notes.first_error,
                config=self.config,
                attached=parts.attached,
                on_update_failure=lambda exc: self._parts.notes.note("updating the run", exc),
            )
        except Exception as exc:
            self._parts.notes.note("finalizing the run", exc)
            self._settle_closure(Closure.NOT_CONFIRMED, describe(exc))
            return
        self._settle_closure(_CLOSURE_OF[closed])

    def _settle_closure(self, closure: Closure, error: str | None = None) -> None:
        self._closure = closure
        self._close_error = error

    def _send_end_marker(self, marker: OtlpRecordSink) -> None:
        metrics = self._parts.metrics
        rows = sum(slot.sink.stats.delivered for slot in metrics.slots) if metrics is not None else 0
        sent = marker.send_end_marker(
            status=self.status.value,
            error=self._final_error or self._parts.notes.first_error,
            summary=self.summary,
            metric_rows=rows,
            owner=self._owns_lifecycle,
        )
        if not sent:
            refused = RuntimeError("the OTLP exporter did not accept it")
            self._parts.notes.note("sending the run.end marker", refused)
            self._settle_closure(Closure.NOT_CONFIRMED, describe(refused))
        else:
            self._closure = Closure.HANDED_TO_GATEWAY if self._owns_lifecycle else Closure.LEFT_TO_OWNER

    def _summary_for_platform(self) -> dict[str, Any]:
        summary = dict(self.summary)
        if self.kind == "eval" and self._parts.processor is not None:
            written = sum(
                slot.sink.episodes_written
                for slot in self._parts.processor.slots
                if isinstance(slot.sink, PrimeTracesSink)
            )
            existing = summary.get("prime_runs")
            block = dict(existing) if isinstance(existing, Mapping) else {}
            block["traces_episodes_written"] = written
            block["delivery"] = {
                report.sink: {
                    "delivered": report.delivered,
                    "failed": report.failed,
                    "dropped": report.dropped,
                    "spooled": report.spooled,
                    "replayed": report.replayed,
                    "still_spooled": report.pending,
                    "possibly_missing": report.possibly_missing,
                }
                for report in self._build_report().sinks
            }
            summary["prime_runs"] = block
        return summary

    def _offline_document(self, status: RunStatus, error: str | None) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "status": status.value,
            "error": error,
            "summary": self.summary,
            "config": self.config,
        }

    def _quietly(self, what: str, step: Callable[[], object], *, surface: bool = True) -> bool:
        try:
            step()
        except Exception as exc:
            self._parts.notes.note(what, exc, surface=surface)
            return False
        return True

    def _build_report(self, *, final: bool = False) -> DeliveryReport:
        sinks, notes = sink_reports(self._uploaders, final=final)
        offline = self._parts.offline
        if offline is not None:
            sinks.append(offline_sink_report(offline))
        folder = self._parts.run_folder or (offline.folder if offline is not None else None)
        return DeliveryReport(
            run_id=self.id,
            url=self.url,
            status=self.status.value,
            sinks=tuple(sinks),
            closure=self._closure,
            close_error=self._close_error,
            folder=str(folder) if folder is not None else None,
            notes=tuple(dict.fromkeys(notes)),
            workers=self.workers,
        )

    def _write_sync_folder(self) -> None:
        """Closing was not confirmed and the run keeps no spool: leave what ``prime-otel sync`` needs to close it."""
        parts = self._parts
        if parts.sync_document is None or parts.sync_folder is None:
            return
        parts.sync_folder.mkdir(parents=True, exist_ok=True)
        write_json_atomically(parts.sync_folder / RUN_FILE, parts.sync_document)
        parts.run_folder = parts.sync_folder

    def _remove_delivered_folder(self) -> None:
        """An online run's folder (its write-ahead log) holds nothing a sync needs once each spool removed itself
        (every record delivered) and the status was confirmed: it goes, instead of piling up run after run."""
        folder = self._parts.run_folder
        if folder is None or self._parts.mode != "online" or not self._owns_lifecycle or self._parts.attached:
            return
        if self._closure is Closure.NOT_CONFIRMED or any(folder.glob("*spool*")):
            return
        shutil.rmtree(folder)

    def _write_report_files(self) -> None:
        folder = self._parts.run_folder
        assert folder is not None and self._report is not None
        write_json_atomically(folder / REPORT_FILE, self._report.to_dict())
        run_file = folder / RUN_FILE
        if self._owns_lifecycle and run_file.exists():
            document = json.loads(run_file.read_text(encoding="utf-8"))
            document.update(
                status=self.status.value,
                error=self._final_error,
                summary=self.summary,
                closure=self._closure.value,
                # What prime-otel sync reads: False leaves closing the run to the sync.
                closed_on_platform=self._closure is not Closure.NOT_CONFIRMED,
            )
            write_json_atomically(run_file, document)

    # -- exit paths ------------------------------------------------------------------------------

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> Literal[False]:
        if exc is None:
            self.finish()
            return False
        status, message = exit_status(exc)
        try:
            self.finish(status=status, error=message)
        except Exception:
            _logger.exception("Run %s: finishing after %s failed", self.id, type(exc).__name__)
        return False

    def _on_exit(self) -> None:
        if self._finished or self._finishing:
            return
        # What ends the process, when it is known: an application's signal handler raised it, or it is an uncaught
        # KeyboardInterrupt (Python sets sys.last_value before atexit; sys.exit() codes stay invisible here).
        raised = SIGNALS.raised_by_handler
        if raised is None and isinstance(getattr(sys, "last_value", None), KeyboardInterrupt):
            raised = sys.last_value
        if not self._owns_lifecycle:
            # A forked child or joined process only drains its records here: its exit is no crash of the run.
            self._parts.print_report = False
        elif raised is not None:
            # The application's signal handler ended the process with an exception: the run ends as it says.
            status, message = exit_status(raised)
            self._finish_swallowing(status, message, None)
            return
        else:
            _logger.warning("Run %s was never finished; reporting it as crashed", self.id)
        self._finish_swallowing(RunStatus.CRASHED, CRASH_MESSAGE, None)

    def close_for_signal(self, signum: int, timeout: float) -> None:
        """A termination signal with the default disposition: crashed (a joined worker only drains)."""
        import signal as signal_module

        name = signal_module.Signals(signum).name
        if not self._owns_lifecycle:
            self._parts.print_report = False  # a worker's part ends with the worker; the owner's report counts it
        self._finish_swallowing(RunStatus.CRASHED, f"signal {name}", timeout)

    def _finish_swallowing(self, status: RunStatus, message: str | None, timeout: float | None) -> None:
        with contextlib.suppress(Exception):
            self.finish(status=status, error=message, timeout=timeout)
        self._parts.notes.take_held()

    def reset_after_fork(self) -> None:
        """In a forked child: keep logging into the same run; never update, finalize or set its status."""
        self._state_lock = threading.RLock()
        self._admission.reset_after_fork()
        self._finish_token = threading.Lock()
        self._done = threading.Event()
        if self._finished:  # finished in the parent before the fork: stays finished here
            self._finish_token.acquire()
            self._done.set()
        self._finishing = False
        self._finishing_thread = None
        self._owns_lifecycle = False
        self._flush_warning.reset_after_fork()
        parts = self._parts
        # The parent's run (owned or joined): this child is one of its workers now, checking and reporting.
        folder = parts.marker.folder if parts.marker is not None else None
        if parts.membership is not None:
            folder = parts.membership.folder
        parts.marker = parts.membership = None
        if folder is not None:
            with contextlib.suppress(RunFinishedError):
                parts.membership = membership_of(folder, self.id)
        self._follow_membership()
        self._status_line = StatusLine(self.id, self._progress)
        self._parts.notes.reset_after_fork()


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())
