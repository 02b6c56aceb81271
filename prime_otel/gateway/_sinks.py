"""A received run's sinks, chosen as ``init()`` chooses them (``dual``, ``traces`` or ``legacy``), and the
platform clients behind them, under the gateway's own credentials."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan

from .._assembly import record_sinks, sink_slots, step_metric_sinks
from .._attempts import REQUEST_PROGRESS
from .._backends import EvalBackend, RunBackend, TrainingBackend
from .._config import Settings
from .._sink import RejectionListener, Sink, SinkStats
from .._types import RunKind, SinkPolicy
from ..client import EvaluationsAPI, ObjectStorage, PlatformHTTP, TrainingRunsAPI, sample_key
from ..client._readback import SampleKey
from ..exporters._sample_rows import EncodedSample, encode_episode_samples, encode_row
from ..exporters.eval_samples import EvalSamplesSink
from ..exporters.rft_samples import DEFAULT_STEP_INTERVAL
from ..exporters.traces import PrimeTracesSink, upload_context
from ..processors import TRAINING_PAUSE_SECONDS, SinkSlot, StepMetricsUploader
from ..records import is_episode
from ._intents import RequestIntents, SinkIntents
from ._pool import DeliveryPool, PooledUploader
from ._spans import DEFAULT_MAX_QUEUED_BYTES, GatewayRecordProcessor, GatewayRecordSpan
from ._state import DELIVERED, FAILED, RELEASED, SENDING, GatewayState, Intent
from ._step_objects import StepObjectsSink

_logger = logging.getLogger(__name__)

#: A record whose request was in flight when the gateway died may count as not stored only once the request is
#: this old (the platform may still be applying it).
RESTART_SETTLE_SECONDS = 5.0
#: Why a record counts failed when no read can tell whether a request in flight at a restart stored it.
POSSIBLY_STORED = "possibly stored before a gateway restart (not sent again)"


class EvalRowsSink:
    """The eval sample table fed with v0 rows, projected here from each record (or the producer's own), rollouts
    numbered per example across the run (several ranks feed one run). The encoded rows go out through
    ``EvalSamplesSink``.

    With ``intents`` (a gateway with ``--state-dir``) each request's records, their rollout numbers and row keys
    are written before it leaves, and what became of them after: a record replayed after a restart keeps its
    rollout number, is counted and not sent when it was delivered or failed, and when its request was in flight
    is read back and sent only when proven absent (undecided: counted failed, possibly missing)."""

    name = EvalSamplesSink.name
    replay_safe = False
    reports_requests = False

    def __init__(
        self,
        rows: EvalSamplesSink,
        *,
        write_only_when: Callable[[], bool] | None = None,
        intents: SinkIntents | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.enabled = True
        self.stats: SinkStats = rows.stats
        #: Told about records counted failed here (set by the slot).
        self.on_rejected: RejectionListener | None = None
        self._rows = rows
        self._write_only_when = write_only_when
        self._intents = intents
        self._clock = clock
        self._sleep = sleep
        # Rollouts per example (task.data.idx) across the run's ranks.
        self._numbers: _Numbers = _Numbers()
        self._warned = False

    @property
    def quiet_off_reason(self) -> str | None:
        return None

    @property
    def intents(self) -> SinkIntents | None:
        return self._intents

    def restore(self) -> None:
        """After a restart: the rollout counters continue from the stored ones."""
        if self._intents is not None:
            for example, number in self._intents.counters.items():
                self._numbers[json.loads(example)] = max(number, self._numbers.get(json.loads(example), 0))

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        if not spans or (self._write_only_when is not None and not self._write_only_when()):
            return
        settled = self._settle_replayed(spans)
        samples: list[EncodedSample] = []
        numbered: dict[int, tuple[str, int]] = {}
        without_rows = 0
        for position, span in enumerate(spans):
            if position in settled:
                continue
            produced: list[EncodedSample] = []
            if isinstance(span, GatewayRecordSpan):
                intent = self._intents.get(span.seq) if self._intents is not None else None
                given = intent.detail if intent is not None and intent.state == RELEASED else None
                produced = self._samples(span, position, None if given is None else int(given["number"]))
                if produced:
                    numbered[position] = (
                        (str(given["example"]), int(given["number"])) if given is not None else self._numbers.last
                    )
            if not produced:
                without_rows += 1
            samples += produced
        self.stats.skipped += without_rows
        if self._intents is None or not numbered:
            self._rows.write_samples(samples)
            return
        keys: dict[int, list[SampleKey | None]] = {}
        for sample in samples:
            keys.setdefault(sample.source, []).append(sample_key(sample.row))
        progress = RequestIntents(
            self._intents,
            {p: seq for p in numbered if (seq := getattr(spans[p], "seq", None)) is not None},
            lambda p: {"example": numbered[p][0], "number": numbered[p][1], "keys": keys.get(p, [])},
            lambda positions: {numbered[p][0]: numbered[p][1] for p in positions},
        )
        token = REQUEST_PROGRESS.set(progress)
        try:
            self._rows.write_samples(samples)
        finally:
            REQUEST_PROGRESS.reset(token)

    def _settle_replayed(self, spans: Sequence[ReadableSpan]) -> set[int]:
        """Positions of records replayed after a restart that this sink has settled already: delivered or failed
        ones are counted again (the counts stored did not include them yet); those whose request was in flight are
        read back first. What was proven absent is left to send, with its rollout number."""
        if self._intents is None:
            return set()
        intents: dict[int, tuple[int, Intent]] = {}
        for position, span in enumerate(spans):
            seq = span.seq if isinstance(span, GatewayRecordSpan) else None
            intent = self._intents.get(seq)
            if seq is not None and intent is not None:
                intents[position] = (seq, intent)
        in_flight = {seq: intent for seq, intent in intents.values() if intent.state == SENDING}
        resolved = self._read_back(in_flight) if in_flight else {}
        settled = set()
        for position, (seq, intent) in intents.items():
            outcome = resolved.get(seq, intent)
            if outcome.state == DELIVERED:
                self.stats.delivered += 1
            elif outcome.state == FAILED:
                if self.on_rejected is not None:
                    self.on_rejected(1, str(outcome.detail.get("reason") or POSSIBLY_STORED))
            else:
                continue
            settled.add(position)
        return settled

    def _read_back(self, in_flight: dict[int, Intent]) -> dict[int, Intent]:
        """What became of records whose request was in flight when the gateway died, from the rows the table
        stored (``EvalSamplesSink.read_back``): stored, absent (released, to send again) or undecided (failed,
        possibly missing). A request younger than ``RESTART_SETTLE_SECONDS`` counts as absent only once it is that
        old: the platform may still be applying the request of a gateway killed a moment ago."""
        assert self._intents is not None
        seqs = sorted(in_flight)
        keys = {seq: [_key(key) for key in in_flight[seq].detail.get("keys") or []] for seq in seqs}
        flat = [key for seq in seqs for key in keys[seq]]
        verdicts = self._rows.read_back(flat)
        young = RESTART_SETTLE_SECONDS - (self._clock() - max(in_flight[seq].at for seq in seqs))
        if young > 0 and flat and all(verdict is False for verdict in verdicts):
            self._sleep(young)
            verdicts = self._rows.read_back(flat)
        changes: dict[int, Intent] = {}
        now, at = self._clock(), 0
        for seq in seqs:
            mine, at = verdicts[at : at + len(keys[seq])], at + len(keys[seq])
            detail = dict(in_flight[seq].detail)
            if mine and all(verdict is True for verdict in mine):
                changes[seq] = Intent(DELIVERED, detail, now)
            elif mine and all(verdict is False for verdict in mine):
                changes[seq] = Intent(RELEASED, detail, now)
            else:
                changes[seq] = Intent(FAILED, {**detail, "reason": POSSIBLY_STORED}, now)
        self._intents.record(changes)
        undecided = sum(1 for change in changes.values() if change.state == FAILED)
        if undecided:
            _logger.warning(
                "%d eval records were being sent when the gateway stopped, and the sample table cannot tell whether "
                "it stored them: counted as possibly missing, not sent again",
                undecided,
            )
        return changes

    def _samples(self, span: GatewayRecordSpan, position: int, number: int | None) -> list[EncodedSample]:
        """The span's rows renumbered (``number``: the rollout number it had before a restart): projected here from
        the record, its bytes spliced in as the row's ``native_wrapper`` (an eval producer sends no rows), else
        encoded from the rows the producer sent."""
        if not span.has_rows:
            if not is_episode(span.record):
                return []
            try:
                numbers: int | _Numbers = self._numbers if number is None else number
                return encode_episode_samples(span.record, numbers, record=span.encoded(), source=position)
            except _PROJECTION_ERRORS as exc:
                _logger.log(
                    logging.DEBUG if self._warned else logging.WARNING,
                    "an episode's row cannot be projected from its record (%s); it reaches the record sinks only",
                    type(exc).__name__,
                )
                self._warned = True
                return []
        rows = span.sample_rows
        if not rows:
            return []
        summary = next((row for row in rows if row.get("trainable")), rows[0])
        if number is None:
            number = self._next_number(summary.get("example_id"))
        samples = []
        for row in rows:
            row["rollout_number"] = number
            samples.append(EncodedSample(*encode_row(row), position))
        return samples

    def _next_number(self, example_id: Any) -> int:
        number: int = self._numbers.get(example_id, 0) + 1
        self._numbers[example_id] = number
        return number

    def flush(self) -> None:
        self._rows.flush()

    def close(self) -> None:
        self._rows.close()

    def reset_after_fork(self) -> None:
        self._rows.reset_after_fork()


class GatewayStepMetrics(PooledUploader, StepMetricsUploader):
    """A received training run's step metrics, delivered on the gateway's pool when it has one."""

    def __init__(self, slots: Sequence[SinkSlot], resource: Resource, pool: DeliveryPool | None) -> None:
        super().__init__(slots, resource)
        self.attach(pool)
        #: Called with the spool seqs of each delivered batch of rows (set by a run with durable state).
        self.on_delivered: Callable[[list[int]], None] | None = None

    @property
    def queued_records(self) -> int:
        if self._lane is None:
            return super().queued_records
        return sum(len(items) for _, items in self._lane.queued())

    def submit(self, row: dict[str, Any], seq: int | None = None) -> bool:
        """Queue one step row (``seq``: its place in the run's durable spool, settled once delivered)."""
        item = _SpooledRow(row, seq)
        return self.push(_METRICS_KIND, [item]) if self._lane is not None else self._put(_METRICS_KIND, [item])

    def _deliver(self, items: list[Any]) -> None:
        # The run merged each step's keys already (``GatewayRun.accept_rows``): rows go out as they come, with
        # no linger, so a delivered row is a written one before its spool entry is settled.
        try:
            rows = [item.row for item in items]
            self._dispatch_to_slots(rows, self._log(_METRICS_KIND, rows))
        finally:
            seqs = [item.seq for item in items if item.seq is not None]
            if seqs and self.on_delivered is not None:
                self.on_delivered(seqs)


@dataclass(frozen=True)
class _SpooledRow:
    row: dict[str, Any]
    seq: int | None


_METRICS_KIND = "metrics"


# What projecting a received record (valid JSON, any shape) may raise.
_PROJECTION_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError)


class _Numbers(dict[Any, int]):
    """Rollout counters keyed by example id; an id that cannot be a key (a JSON list or object) by its JSON.
    ``last``: the example (as JSON) and number of the latest rollout numbered."""

    last: tuple[str, int] = ("null", 0)

    def __getitem__(self, key: Any) -> int:
        return super().__getitem__(_hashable(key))

    def __setitem__(self, key: Any, value: int) -> None:
        super().__setitem__(_hashable(key), value)
        self.last = (json.dumps(key, sort_keys=True, default=str), value)

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(_hashable(key), default)


def _key(value: Any) -> SampleKey | None:
    """A row key as an intent keeps it (a JSON pair)."""
    return (str(value[0]), str(value[1])) if isinstance(value, list) and len(value) == 2 else None


def _hashable(value: Any) -> Any:
    """An example id as a dictionary key (an id that is a JSON list or object, by its JSON)."""
    try:
        hash(value)
    except TypeError:
        return json.dumps(value, sort_keys=True, default=str)
    return value


@dataclass(frozen=True)
class PipelineOptions:
    sinks: SinkPolicy = "dual"
    samples_step_interval: int = DEFAULT_STEP_INTERVAL
    max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES
    traces_opt_out: bool = False


@dataclass
class RunPipeline:
    """What one received run writes through: its record processor, step metrics, lifecycle and clients."""

    processor: GatewayRecordProcessor
    metrics: GatewayStepMetrics | None
    backend: RunBackend
    traces: PrimeTracesSink | None
    closers: list[Callable[[], None]] = field(default_factory=list)
    #: The non-idempotent sinks keeping durable intents (a gateway with ``--state-dir``).
    durable: list[EvalRowsSink | StepObjectsSink] = field(default_factory=list)


class PipelineFactory:
    """Builds a received run's pipeline (no network: the run exists; the gateway attaches to it)."""

    def __init__(
        self,
        settings: Settings,
        options: PipelineOptions,
        pool: DeliveryPool | None = None,
        state: GatewayState | None = None,
    ) -> None:
        """``state``: the gateway's durable state, where each run's non-idempotent sinks keep their intents."""
        self._settings = settings
        self._options = options
        self._pool = pool
        self._state = state

    def open(self, run_id: str, kind: RunKind, resource: Resource) -> RunPipeline:
        settings, options, state = self._settings, self._options, self._state
        http = PlatformHTTP(api_key=settings.api_key, base_url=settings.base_url)
        closers: list[Callable[[], None]] = [http.close]
        backend: RunBackend = (
            EvalBackend(EvaluationsAPI(http)) if kind == "eval" else TrainingBackend(TrainingRunsAPI(http))
        )
        durable: list[EvalRowsSink | StepObjectsSink] = []

        def legacy(write_only_when: Callable[[], bool] | None) -> Sink:
            sink: EvalRowsSink | StepObjectsSink
            if kind == "eval":
                rows = EvalSamplesSink(EvaluationsAPI(http), run_id)
                intents = SinkIntents(state, run_id, rows.name) if state is not None else None
                sink = EvalRowsSink(rows, write_only_when=write_only_when, intents=intents)
            else:
                intents = SinkIntents(state, run_id, StepObjectsSink.name) if state is not None else None
                sink = StepObjectsSink(
                    http,
                    ObjectStorage(),
                    run_id,
                    step_interval=options.samples_step_interval,
                    write_only_when=write_only_when,
                    intents=intents,
                )
            if intents is not None:
                durable.append(sink)
            return sink

        traces, sinks = record_sinks(
            run_id=run_id,
            kind=kind,
            settings=settings,
            context=upload_context(kind),
            policy=options.sinks,
            opted_out=options.traces_opt_out,
            legacy=legacy,
        )
        pause = TRAINING_PAUSE_SECONDS if kind == "train" else None
        on_failure = _failure_logger(run_id)
        processor = GatewayRecordProcessor(
            sink_slots(sinks, pause_seconds=pause, on_failure=on_failure),
            resource,
            max_queued_bytes=options.max_queued_bytes,
            thread_name=f"prime-otel-gateway-{run_id}",
            pool=self._pool,
        )
        metrics = None
        if kind == "train":
            metric_slots = sink_slots(step_metric_sinks(http, run_id, kind), pause_seconds=pause, on_failure=on_failure)
            metrics = GatewayStepMetrics(metric_slots, resource, self._pool)
        return RunPipeline(
            processor=processor,
            metrics=metrics,
            backend=backend,
            traces=traces if options.sinks != "legacy" else None,
            closers=closers,
            durable=durable,
        )


def _failure_logger(run_id: str) -> Callable[[str, BaseException], None]:
    def note(sink: str, error: BaseException) -> None:
        _logger.warning("run %s: the %s sink failed: %s: %s", run_id, sink, type(error).__name__, error)

    return note
