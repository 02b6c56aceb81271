"""One run as the gateway holds it: replays deduplicated, records and step rows fed to its pipeline, and the
close (drain, then finalize once with the owner's status) when ``EndTracker`` says the run is over."""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from .. import _conventions as conv
from .._backends import close_run
from .._types import RunKind, RunStatus
from ..exporters.traces import PrimeTracesSink
from ..processors import Uploader
from ..processors._spool import RunSpool
from ..records import clean, compact_json
from ..records._genai import GenAISpan, marks_episode
from ._auth import ANONYMOUS
from ._ending import EPISODES, METRIC_ROWS, SPAN_KINDS, Ending, EndMarker, EndTracker
from ._envelope import Invalid
from ._genai import Assembly, EpisodeAssembler, read_span_line, span_line
from ._otlp import Origin, ReceivedSpan, StepRow
from ._outcome import Outcome
from ._sinks import RunPipeline
from ._spans import ReceivedRecord
from ._state import SPOOL_SINK, GatewayState, StoredRun

_logger = logging.getLogger(__name__)

#: The spool kinds of a step row and of a GenAI span awaiting assembly (records are logged under their span name).
METRIC_ROW_KIND, GENAI_SPAN_KIND = "metric_row", "genai_span"
#: The counts the durable state keeps, one row each: per uploader its sinks', and the run's on arrival.
RECORDS_UPLOADER, METRICS_UPLOADER, ARRIVALS = "records", "metrics", "arrivals"
#: The counts of GenAI spans given up: traces by why, their spans, and spans past a trace's bound.
GENAI_GIVEN_UP, GENAI_SPANS_GIVEN_UP, GENAI_SPANS_DROPPED = (
    "genai_traces_given_up",
    "genai_spans_given_up",
    ("genai_spans_dropped"),
)
#: Step rows queued for a run's metrics uploader above which the run answers 503.
MAX_QUEUED_METRIC_ROWS = 200
#: Spool seqs read at a time when a restarted run takes up its spool.
_RESTORE_CHUNK = 256


class RunState(str, enum.Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class GatewayRun:
    """A run's state on this gateway. ``accept_*`` run on request threads; ``close`` on a closer thread."""

    def __init__(
        self,
        run_id: str,
        kind: RunKind,
        pipeline: RunPipeline,
        tracker: EndTracker,
        *,
        drain_seconds: float,
        sender: str = ANONYMOUS,
        state: GatewayState | None = None,
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
        self._episodes = EpisodeAssembler()
        self._state = state
        self._stored_world: tuple[int, list[int]] | None = None
        self._stored_arrival_counts: dict[str, Any] = {"duplicates": 0, "foreign": 0, "rejected": 0, "invalid": {}}
        self._spool = state.spool(run_id) if state is not None else None
        if self._spool is not None:
            processor, metrics = pipeline.processor, pipeline.metrics
            processor.on_delivered = lambda seqs: self._settle(RECORDS_UPLOADER, processor, seqs)
            if metrics is not None:
                metrics.on_delivered = lambda seqs: self._settle(METRICS_UPLOADER, metrics, seqs)

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
                self._save_arrival_counts()
                outcome.reject(len(spans), self._closed_reason())
                return
            self._tracker.touch(origin.rank, origin.world_size)
            batches: dict[str, list[tuple[bytes, ReceivedRecord]]] = {}
            markers: list[tuple[bytes, EndMarker]] = []
            taken: set[bytes] = set()
            genai: list[tuple[bytes, GenAISpan]] = []
            for span in spans:
                if isinstance(span, Invalid):
                    self._refuse(span.reason, outcome)
                    continue
                if span.name == conv.HEARTBEAT_SPAN:
                    continue  # liveness only: the touch above renewed the lease
                if span.span_id in self._seen_spans or span.span_id in taken:
                    self.duplicates += 1
                    continue
                if span.genai is not None:
                    genai.append((span.span_id, span.genai))
                    taken.add(span.span_id)
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
            self._note_world()
            for name, entries in batches.items():
                span_ids = [span_id for span_id, _ in entries]
                records = self._spooled(name, [record for _, record in entries], span_ids)
                if records is None:
                    outcome.retry = f"run {self.id} could not log {len(entries)} records now"
                    continue
                # Counted before they are queued: a delivery settled (and its counts stored) before the count was
                # stored would make a restart forget the record and take the sender's retry of it as new.
                if self._state is not None:
                    self._state.arrived(self.id, origin.rank, SPAN_KINDS[name], span_ids)
                if self._pipeline.processor.offer(name, records):
                    self._seen_spans.update(span_ids)
                    self._tracker.count(origin.rank, SPAN_KINDS[name], len(entries))
                else:
                    if self._state is not None:
                        self._state.not_arrived(self.id, origin.rank, SPAN_KINDS[name], span_ids)
                    self._unspool(records)
                    outcome.retry = f"run {self.id} could not queue {len(entries)} records now"
            for span_id, marker in markers:
                if self._state is not None:
                    self._state.marked(self.id, span_id, marker)
                self._seen_spans.add(span_id)
                if marker.summary_problem is not None:
                    self.invalid[marker.summary_problem] += 1
                self._tracker.mark(marker)
                _logger.info("run %s: rank %d ended %s", self.id, marker.rank, marker.status.value)
            if genai:
                self._take_genai(origin.rank, genai, outcome)
            self._save_arrival_counts()

    def _take_genai(self, rank: int, entries: list[tuple[bytes, GenAISpan]], outcome: Outcome) -> None:
        """GenAI spans join their traces to await assembly (on the reaper's tick, ``due_ending``, never on the
        request thread). With durable state they are logged to the run's spool and their span ids stored first, so
        what the sender sees acknowledged is assembled after a restart too."""
        seqs: list[int] = []
        if self._spool is not None and self._state is not None:
            logged: list[tuple[bytes, GenAISpan, bytes]] = []
            for span_id, view in entries:
                try:
                    logged.append((span_id, view, span_line(rank, span_id, view)))
                except (ValueError, TypeError, RecursionError) as exc:
                    self._refuse(f"a GenAI span that cannot be stored ({type(exc).__name__})", outcome)
            # The episode span of a trace held lets the trace leave the spool: it is taken past the spool's bound
            # (else spans waiting for their episode span could fill the spool for good), unless spans of its trace
            # sent with it were refused (the trace would be assembled without them).
            completing: list[tuple[bytes, GenAISpan, bytes]] = []
            others: list[tuple[bytes, GenAISpan, bytes]] = []
            for entry in logged:
                (completing if self._completes_held_trace(entry[1]) else others).append(entry)
            taken: list[tuple[bytes, GenAISpan, bytes]] = []
            if others:
                appended = self._spool.append(GENAI_SPAN_KIND, [line for _, _, line in others])
                if appended is None:
                    outcome.retry = f"run {self.id} could not log {len(others)} GenAI spans now (its spool is full)"
                    refused = {view.trace_id for _, view, _ in others}
                    completing = [entry for entry in completing if entry[1].trace_id not in refused]
                else:
                    taken, seqs = others, appended
            if completing:
                appended = self._spool.append(GENAI_SPAN_KIND, [line for _, _, line in completing], past_bound=True)
                if appended is None:
                    outcome.retry = f"run {self.id} could not log {len(completing)} GenAI spans now"
                else:
                    taken, seqs = taken + completing, seqs + appended
            if not taken:
                return
            self._state.remembered(self.id, [span_id for span_id, _, _ in taken])
            entries = [(span_id, view) for span_id, view, _ in taken]
        self._seen_spans.update(span_id for span_id, _ in entries)
        self._episodes.add(rank, [view for _, view in entries], seqs)

    def _completes_held_trace(self, span: GenAISpan) -> bool:
        return marks_episode(span.name, span.attributes) and self._episodes.holds(span.trace_id)

    def _submit_assembled(self, assemblies: list[Assembly]) -> None:
        """Episodes assembled from GenAI spans join the run's records like received ones (and count as arrived);
        the spans they came from (or of a trace given up) are released from the spool."""
        now = time.time_ns()
        for assembly in assemblies:
            if not assembly.episodes:
                self._release(assembly.seqs)
                continue
            received = [
                ReceivedRecord(conv.EPISODE_SPAN, compact_json(record).decode("utf-8"), None, now)
                for _, record in assembly.episodes
            ]
            # Past the spool's bound: the episodes replace the spans the spool holds, so it holds at most about its
            # bound plus the traces it held when it filled.
            records = self._spooled(conv.EPISODE_SPAN, received, consumed=assembly.seqs, past_bound=True)
            if records is None:  # the spool keeps nothing more (a disk error)
                self._release(assembly.seqs)
                self.invalid["an assembled GenAI episode the run's spool could not log"] += len(received)
                continue
            arrived = Counter(rank for rank, _ in assembly.episodes)
            for rank, count in arrived.items():
                self._tracker.count(rank, EPISODES, count)
            if self._spool is not None and self._state is not None:
                self._state.assembled(self.id, arrived, assembly.seqs)
                self._spool.settle(SPOOL_SINK, assembly.seqs)
            if not self._pipeline.processor.offer(conv.EPISODE_SPAN, records):
                self._release([record.seq for record in records if record.seq is not None])
                self.invalid["an assembled GenAI episode found the run's queue full"] += len(received)
        self._save_arrival_counts()

    def accept_rows(self, origin: Origin, rows: list[StepRow], invalid: list[Invalid], outcome: Outcome) -> None:
        """Take one resource's step rows: each step's keys are merged into one row, posted again when it grows;
        metrics that could not be read are refused and counted invalid. With durable state the rows are logged
        before they count as taken; when the spool is full none is taken and ``outcome.retry`` is set."""
        with self._lock:
            if self.state is not RunState.OPEN:
                self.rejected += len(rows) + len(invalid)
                self._save_arrival_counts()
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
            self._note_world()
            self._save_arrival_counts()
            metrics = self._pipeline.metrics
            outgoing: list[dict[str, Any]] = []
            for row in fresh if metrics is not None else []:
                values: dict[str, Any] = dict(row.values)
                if row.step is not None:
                    # Merged again the same when a refused request is sent again.
                    merged = self._step_rows.setdefault(row.step, {})
                    merged.update(row.values)
                    values = {**merged, "step": row.step}
                values["_timestamp"] = row.time_ns / 1e9 if row.time_ns else time.time()
                outgoing.append(values)
            seqs: list[int | None] = [None] * len(outgoing)
            if self._spool is not None and outgoing:
                logged = self._spool.append(METRIC_ROW_KIND, [compact_json(values) for values in outgoing])
                if logged is None:
                    self._seen_rows.difference_update((origin.rank, row.step, row.time_ns) for row in fresh)
                    outcome.retry = f"run {self.id} could not log {len(outgoing)} step rows now (its spool is full)"
                    return
                seqs = list(logged)
            if self._state is not None and fresh:
                keys = [(row.step, row.time_ns) for row in fresh]
                self._state.rows_arrived(self.id, origin.rank, keys, METRIC_ROWS)
            self._tracker.count(origin.rank, METRIC_ROWS, len(fresh))
            if metrics is not None:
                for values, seq in zip(outgoing, seqs, strict=True):
                    metrics.submit(values, seq)

    def note_foreign(self, count: int) -> None:
        """Records another sender tried to write into this run (refused)."""
        with self._lock:
            self.foreign += count
            self._save_arrival_counts()

    # -- durable state (``--state-dir``) -------------------------------------------------------------

    def _save_arrival_counts(self) -> None:
        """Duplicates, foreign, rejected and invalid records as counted on arrival, stored (when they changed)
        before the sender is answered. Once the run closed its state is gone and nothing more is stored."""
        if self._state is None or self.state is RunState.CLOSED:
            return
        counts = {
            "duplicates": self.duplicates,
            "foreign": self.foreign,
            "rejected": self.rejected,
            "invalid": dict(self.invalid),
            **self._genai_counts(),
        }
        if counts != self._stored_arrival_counts:
            self._state.counted(self.id, ARRIVALS, counts)
            self._stored_arrival_counts = counts

    def _genai_counts(self) -> dict[str, Any]:
        """What the assembly of GenAI spans gave up, as ``/runs``, the run's summary and the durable state keep it."""
        episodes = self._episodes
        return {
            GENAI_GIVEN_UP: dict(episodes.given_up),
            GENAI_SPANS_GIVEN_UP: episodes.spans_given_up,
            GENAI_SPANS_DROPPED: episodes.spans_dropped,
        }

    def _note_world(self) -> None:
        if self._state is not None:
            world = self._tracker.world
            if world != self._stored_world:
                self._state.touched(self.id, *world)
                self._stored_world = world

    def _spooled(
        self,
        name: str,
        records: list[ReceivedRecord],
        span_ids: list[bytes] | None = None,
        *,
        consumed: list[int] | None = None,
        past_bound: bool = False,
    ) -> list[ReceivedRecord] | None:
        """The records with their seqs in the run's spool (logged before the sender is answered); None when the
        spool is full. ``span_ids``: each received record's (a restart replays it only if the database remembers
        it, i.e. its sender was answered); ``consumed``: the seqs of the GenAI spans the records were assembled
        from; ``past_bound``: logged even when the spool is full (they replace what it holds)."""
        if self._spool is None:
            return records
        wrapped = []
        for position, record in enumerate(records):
            entry: dict[str, Any] = {"record": record.record_json, "samples": record.samples_json}
            entry["end"] = record.end_time_ns
            if span_ids is not None:
                entry["id"] = span_ids[position].hex()
            if consumed is not None:
                entry["from"] = consumed
            wrapped.append(compact_json(entry))
        seqs = self._spool.append(name, wrapped, past_bound=past_bound)
        if seqs is None:
            return None
        return [dataclasses.replace(record, seq=seq) for record, seq in zip(records, seqs, strict=True)]

    def _unspool(self, records: list[ReceivedRecord] | None) -> None:
        """Records logged but not taken (the sender retries them): never replayed from the spool."""
        self._release([record.seq for record in records or [] if record.seq is not None])

    def _release(self, seqs: list[int]) -> None:
        """Logged entries that are no longer needed: never replayed from the spool."""
        if self._spool is not None and self._state is not None and seqs:
            self._state.unspooled(self.id, seqs)
            self._spool.settle(SPOOL_SINK, seqs)

    def _settle(self, uploader: str, source: Uploader[Any], seqs: list[int]) -> None:
        """A batch was delivered: in one write its records are settled (never replayed) and the uploader's counts
        stored with them, so a restart neither delivers nor counts them twice. The spool's own ledger, only there to
        free what was delivered, follows soon."""
        if self._spool is not None and self._state is not None:
            self._state.delivered(self.id, uploader, seqs, _counts(source))
            for sink in self._pipeline.durable:
                if sink.intents is not None:
                    sink.intents.forget(seqs)
            self._spool.settle(SPOOL_SINK, seqs)

    def restore(self, stored: StoredRun) -> int:
        """A restarted gateway takes the run up where it was: dedupe keys, arrivals, markers, and the records it
        had taken but not delivered, queued again. Returns how many were queued again."""
        self._tracker.restore(stored.world_size, stored.ranks, stored.received, stored.markers)
        self._stored_world = self._tracker.world
        self._seen_spans = set(stored.seen_spans)
        self._seen_rows = set(stored.seen_rows)
        arrivals = stored.counts.get(ARRIVALS)
        if arrivals:
            self.duplicates, self.foreign = int(arrivals["duplicates"]), int(arrivals["foreign"])
            self.rejected = int(arrivals.get("rejected", 0))
            self.invalid = Counter({str(k): int(v) for k, v in dict(arrivals["invalid"]).items()})
            self._stored_arrival_counts = dict(arrivals)
            self._episodes.restore_counts(
                dict(arrivals.get(GENAI_GIVEN_UP) or {}),
                int(arrivals.get(GENAI_SPANS_GIVEN_UP, 0)),
                int(arrivals.get(GENAI_SPANS_DROPPED, 0)),
            )
        _restore_counts(self._pipeline.processor, stored.counts.get(RECORDS_UPLOADER))
        if self._pipeline.metrics is not None:
            _restore_counts(self._pipeline.metrics, stored.counts.get(METRICS_UPLOADER))
        for sink in self._pipeline.durable:
            if sink.intents is not None:
                sink.intents.restore(
                    stored.intents.get(sink.intents.sink, {}), stored.counters.get(sink.intents.sink, {})
                )
                sink.restore()
        if self._spool is None:
            return 0
        self._spool.recover([SPOOL_SINK])
        requeued = 0
        for seqs in _pending_chunks(self._spool):
            settled = [seq for seq in seqs if seq in stored.settled]
            if settled:
                self._spool.settle(SPOOL_SINK, settled)  # delivered before the restart; the ledger had not said so
                seqs = [seq for seq in seqs if seq not in stored.settled]
                if not seqs:
                    continue
            by_kind: dict[str, list[ReceivedRecord]] = {}
            unacknowledged: list[int] = []
            for spooled in self._spool.read(seqs):
                if spooled.kind == METRIC_ROW_KIND:
                    if self._pipeline.metrics is not None:
                        self._pipeline.metrics.submit(spooled.record, spooled.seq)
                        requeued += 1
                    continue
                wrapper = spooled.record
                if spooled.kind == GENAI_SPAN_KIND:
                    # Held for assembly again (pending in the spool until its trace is assembled or given up).
                    rank, span_id, view = read_span_line(wrapper)
                    if span_id in stored.seen_spans:
                        self._episodes.add(rank, [view], [spooled.seq])
                    else:
                        unacknowledged.append(spooled.seq)  # logged, never acknowledged: its sender sends it again
                    continue
                if "id" in wrapper and bytes.fromhex(wrapper["id"]) not in stored.seen_spans:
                    unacknowledged.append(spooled.seq)  # logged, never acknowledged: its sender sends it again
                    continue
                if not all(seq in stored.settled for seq in wrapper.get("from") or ()):
                    # Assembled from GenAI spans but not yet counted: the spans, still held, are assembled again.
                    unacknowledged.append(spooled.seq)
                    continue
                received = ReceivedRecord(
                    spooled.kind, wrapper["record"], wrapper.get("samples"), int(wrapper.get("end") or 0), spooled.seq
                )
                by_kind.setdefault(spooled.kind, []).append(received)
            self._release(unacknowledged)
            dropped = set(unacknowledged)
            # In the queue (or held for assembly) again; settled once delivered (or assembled).
            self._spool.defer(SPOOL_SINK, [seq for seq in seqs if seq not in dropped])
            for name, records in by_kind.items():
                self._pipeline.processor.offer(name, records)
                requeued += len(records)
            self._pipeline.processor.flush(None)
            if self._pipeline.metrics is not None:
                self._pipeline.metrics.flush(None)
        return requeued

    def _refuse(self, reason: str, outcome: Outcome) -> None:
        self.invalid[reason] += 1
        outcome.reject(1, f"run {self.id}: {reason}")

    def _closed_reason(self) -> str:
        return f"run {self.id} is {self.state.value} on this gateway; its data is no longer taken"

    # -- closing ---------------------------------------------------------------------------------

    def due_ending(self) -> Ending | None:
        if self.state is not RunState.OPEN:
            return None
        with self._lock:
            if self.state is RunState.OPEN:
                self._submit_assembled(self._episodes.settled())
        return self._tracker.decide()

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
        self._submit_assembled(self._episodes.drain())
        self._drain(self._drain_seconds)
        if ending.status is not None:
            self._finalize(ending.status, ending)
        if ending.missing:
            _logger.warning("run %s: %d announced records never reached this gateway", self.id, ending.missing)
        self._finish(ending)

    def abandon(self, timeout: float) -> None:
        """Gateway shutdown: drain what arrived, leave the run open on the platform (its producers may live on).
        With durable state the run stays open there too, for the next start on the folder to take up, and GenAI
        spans awaiting assembly stay logged for it; without, what can be assembled now is."""
        if self.begin_close():
            if self._state is None:
                self._submit_assembled(self._episodes.drain())
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
        try:
            close_run(
                self._pipeline.backend,
                self.id,
                status,
                summary=summary,
                error=ending.error,
                on_update_failure=lambda exc: self._note_close_failure("updating", exc),
            )
        except Exception as exc:
            self._note_close_failure("finalizing", exc)

    def _with_invalid_records(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The summary with ``prime_runs.invalid_records`` (reason -> count) when this gateway refused any, and
        ``prime_runs.genai_traces_given_up`` (why -> traces) with ``genai_spans_given_up`` when GenAI traces
        were given up (``genai_spans_dropped``: spans past a trace's bound)."""
        invalid = self.invalid_reasons()
        genai = {key: value for key, value in self._genai_counts().items() if value}
        if invalid or genai:
            existing = summary.get("prime_runs")
            block = dict(existing) if isinstance(existing, Mapping) else {}
            if invalid:
                block["invalid_records"] = dict(invalid)
            block.update(genai)
            summary["prime_runs"] = block
        return summary

    def _note_close_failure(self, what: str, exc: Exception) -> None:
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
            if self._state is not None and ending is not None:
                self._state.closed(self.id)
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
        uploaders: list[Uploader[Any]] = [
            pipeline.processor,
            *([pipeline.metrics] if pipeline.metrics is not None else []),
        ]
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
            "genai": self._genai_status(),
            "sinks": {
                slot.name: {
                    "delivered": slot.sink.stats.delivered,
                    "failed": slot.failed,
                    "failure_reasons": dict(slot.failure_reasons),
                    "skipped": slot.sink.stats.skipped,
                }
                for uploader in uploaders
                for slot in uploader.slots
            },
            **self._tracker.snapshot(),
        }

    def _genai_status(self) -> dict[str, Any]:
        """GenAI spans waiting for their trace's assembly, and what the assembly gave up."""
        traces, spans = self._episodes.waiting()
        counts = self._genai_counts()
        return {
            "traces_waiting": traces,
            "spans_held": spans,
            "traces_given_up": sum(counts[GENAI_GIVEN_UP].values()),
            "given_up_reasons": counts[GENAI_GIVEN_UP],
            "spans_given_up": counts[GENAI_SPANS_GIVEN_UP],
            "spans_dropped": counts[GENAI_SPANS_DROPPED],
        }


def _counts(uploader: Uploader[Any]) -> dict[str, Any]:
    """The uploader's per-sink counts (and, for records, those refused as unreadable on delivery), as stored."""
    sinks: dict[str, Any] = {}
    for slot in uploader.slots:
        stats = slot.sink.stats
        counts: dict[str, Any] = {
            "delivered": stats.delivered,
            "requests": stats.requests,
            "bytes": stats.bytes,
            "skipped": stats.skipped,
            "failed": slot.failed,
            "failure_reasons": dict(slot.failure_reasons),
        }
        if isinstance(slot.sink, PrimeTracesSink):
            counts["episodes_written"] = slot.sink.episodes_written
        sinks[slot.name] = counts
    invalid = getattr(uploader, "invalid_reasons", None)
    return {"sinks": sinks, "invalid": dict(invalid) if invalid is not None else {}}


def _restore_counts(uploader: Uploader[Any], stored: Mapping[str, Any] | None) -> None:
    """Counts as of the uploader's last batch delivered before a restart; what the replay delivers adds to them."""
    if not stored:
        return
    for slot in uploader.slots:
        counts = stored.get("sinks", {}).get(slot.name)
        if not counts:
            continue
        stats = slot.sink.stats
        stats.delivered, stats.requests = int(counts["delivered"]), int(counts["requests"])
        stats.bytes, stats.skipped = int(counts["bytes"]), int(counts["skipped"])
        slot.failed = int(counts["failed"])
        slot.failure_reasons = Counter({str(k): int(v) for k, v in dict(counts["failure_reasons"]).items()})
        if isinstance(slot.sink, PrimeTracesSink):
            slot.sink.episodes_written = int(counts.get("episodes_written", 0))
    invalid = getattr(uploader, "invalid_reasons", None)
    if invalid is not None:
        invalid.update({str(k): int(v) for k, v in dict(stored.get("invalid") or {}).items()})


def _pending_chunks(spool: RunSpool) -> Iterator[list[int]]:
    """The seqs the spool's ledger held pending when the run was taken up, oldest first, a chunk at a time (GenAI
    spans stay pending while their trace waits for assembly, so the ledger is read once, not until it empties)."""
    chunk: list[int] = []
    for start, stop in spool.sink(SPOOL_SINK).pending.ranges():
        for seq in range(start, stop):
            chunk.append(seq)
            if len(chunk) == _RESTORE_CHUNK:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


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
