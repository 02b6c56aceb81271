"""A received run's sinks, chosen as ``init()`` chooses them (``dual``, ``traces`` or ``legacy``), and the
platform clients behind them, under the gateway's own credentials."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan

from .._assembly import record_sinks, sink_slots, step_metric_sinks
from .._backends import EvalBackend, RunBackend, TrainingBackend
from .._config import Settings
from .._sink import Sink, SinkStats
from .._types import RunKind, SinkPolicy
from ..client import EvaluationsAPI, ObjectStorage, PlatformHTTP, TrainingRunsAPI
from ..exporters._sample_rows import EncodedSample, encode_episode_samples, encode_row
from ..exporters.eval_samples import EvalSamplesSink
from ..exporters.rft_samples import DEFAULT_STEP_INTERVAL, RftSampleRowsSink
from ..exporters.traces import PrimeTracesSink, upload_context
from ..processors import TRAINING_PAUSE_SECONDS, SinkSlot, StepMetricsUploader
from ..records import is_episode
from ._pool import DeliveryPool, PooledUploader
from ._spans import DEFAULT_MAX_QUEUED_BYTES, GatewayRecordProcessor, GatewayRecordSpan

_logger = logging.getLogger(__name__)


class EvalRowsSink:
    """The eval sample table fed with v0 rows, projected here from each record (or the producer's own), rollouts
    numbered per example across the run (several ranks feed one run). The encoded rows go out through
    ``EvalSamplesSink``."""

    name = EvalSamplesSink.name
    replay_safe = False
    reports_requests = False

    def __init__(self, rows: EvalSamplesSink, *, write_only_when: Callable[[], bool] | None = None) -> None:
        self.enabled = True
        self.stats: SinkStats = rows.stats
        self._rows = rows
        self._write_only_when = write_only_when
        # Rollouts per example (task.data.idx) across the run's ranks.
        self._numbers: _Numbers = _Numbers()
        self._warned = False

    @property
    def quiet_off_reason(self) -> str | None:
        return None

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        if not spans or (self._write_only_when is not None and not self._write_only_when()):
            return
        samples: list[EncodedSample] = []
        without_rows = 0
        for position, span in enumerate(spans):
            produced = self._samples(span, position) if isinstance(span, GatewayRecordSpan) else []
            if not produced:
                without_rows += 1
            samples += produced
        self.stats.skipped += without_rows
        self._rows.write_samples(samples)

    def _samples(self, span: GatewayRecordSpan, position: int) -> list[EncodedSample]:
        """The span's rows renumbered: projected here from the record, its bytes spliced in as the row's
        ``native_wrapper`` (an eval producer sends no rows), else encoded from the rows the producer sent."""
        if not span.has_rows:
            if not is_episode(span.record):
                return []
            try:
                return encode_episode_samples(span.record, self._numbers, record=span.encoded(), source=position)
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
    """Rollout counters keyed by example id; an id that cannot be a key (a JSON list or object) by its JSON."""

    def __getitem__(self, key: Any) -> int:
        return super().__getitem__(_hashable(key))

    def __setitem__(self, key: Any, value: int) -> None:
        super().__setitem__(_hashable(key), value)

    def get(self, key: Any, default: Any = None) -> Any:
        return super().get(_hashable(key), default)


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


class PipelineFactory:
    """Builds a received run's pipeline (no network: the run exists; the gateway attaches to it)."""

    def __init__(self, settings: Settings, options: PipelineOptions, pool: DeliveryPool | None = None) -> None:
        self._settings = settings
        self._options = options
        self._pool = pool

    def open(self, run_id: str, kind: RunKind, resource: Resource) -> RunPipeline:
        settings, options = self._settings, self._options
        http = PlatformHTTP(api_key=settings.api_key, base_url=settings.base_url)
        closers: list[Callable[[], None]] = [http.close]
        backend: RunBackend = (
            EvalBackend(EvaluationsAPI(http)) if kind == "eval" else TrainingBackend(TrainingRunsAPI(http))
        )

        def legacy(write_only_when: Callable[[], bool] | None) -> Sink:
            if kind == "eval":
                rows = EvalSamplesSink(EvaluationsAPI(http), run_id)
                return EvalRowsSink(rows, write_only_when=write_only_when)
            return RftSampleRowsSink(
                TrainingRunsAPI(http),
                ObjectStorage(),
                run_id,
                step_interval=options.samples_step_interval,
                write_only_when=write_only_when,
            )

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
        )


def _failure_logger(run_id: str) -> Callable[[str, BaseException], None]:
    def note(sink: str, error: BaseException) -> None:
        _logger.warning("run %s: the %s sink failed: %s: %s", run_id, sink, type(error).__name__, error)

    return note
