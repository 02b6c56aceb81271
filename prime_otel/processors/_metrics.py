"""The metrics uploader: ``log_metrics`` rows and the run's own instruments, merged into one row per step.

``log_metrics`` only queues the checked values, plain numbers already (a few µs on the caller's thread). The
uploader thread merges them into their step's row in the step book, as they are: no OpenTelemetry instrument is
involved, so an integer arrives exact. What the producer's instruments of ``run.meter()`` measured is collected
(the SDK's DELTA points, accumulated per step by ``StepRowExporter``) and merged into the same rows. A row is
handed to the sinks once its step is due (see ``_step_book.py``), in step order; the ``rft_metrics`` sink then
paces its requests under the platform's limit, so a trainer faster than the limit has its rows wait, never dropped.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource

from .._conventions import RUN_STEP
from .._sink import MetricsRow
from ..records import StepRowExporter, compact_json
from ._slot import SinkSlot
from ._spool import RunSpool, SpooledRecord
from ._step_book import StepBook
from ._uploader import Uploader

_logger = logging.getLogger(__name__)
_METRICS = "metrics"
_COLLECT_ONLY: Mapping[str, Any] = {}
#: How often the uploader thread looks for due rows and collects the run's instruments while nothing is logged.
_IDLE_COLLECT_SECONDS = 1.0


class StepMetricsUploader(Uploader[MetricsRow]):
    """Owns the run's ``MeterProvider`` (collected by the uploader thread only: no periodic thread) and the step
    book; every sink gets each step's row once it is due."""

    def __init__(
        self, slots: Sequence[SinkSlot[MetricsRow]], resource: Resource, spool: RunSpool | None = None
    ) -> None:
        super().__init__(slots, thread_name="prime-otel-metrics", spool=spool)
        self._instruments = StepRowExporter()
        self._reader = PeriodicExportingMetricReader(self._instruments, export_interval_millis=math.inf)
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[self._reader], shutdown_on_exit=False)
        self._meter: Meter = self.meter_provider.get_meter("prime_otel.run")
        self._book = StepBook()
        self._warned_stepless = False
        #: Also handed every batch of step rows (the OTLP tee); it must not block.
        self.tee: Callable[[list[dict[str, Any]]], None] | None = None

    @property
    def queued_records(self) -> int:
        return super().queued_records + len(self._book)

    def submit(self, row: dict[str, Any]) -> bool:
        return self._put(_METRICS, [row])

    def collect(self) -> bool:
        """Collect what the producer's own instruments measured (points carrying ``prime.run.step``)."""
        return self._put(_METRICS, [_COLLECT_ONLY])

    def _deliver(self, items: list[Any]) -> None:
        now = time.monotonic()
        for values in items:
            if values is not _COLLECT_ONLY:
                self._book.merge(values, now)
        self._collect_instruments(now)
        self._hand_due(now)

    def _tick_timeout(self) -> float | None:
        due = self._book.next_due()
        if due is None:
            return _IDLE_COLLECT_SECONDS
        return min(_IDLE_COLLECT_SECONDS, max(0.01, due - time.monotonic()))

    def _tick(self) -> None:
        now = time.monotonic()
        self._collect_instruments(now)
        self._hand_due(now)

    def _release_held(self) -> None:
        now = time.monotonic()
        self._collect_instruments(now)
        self._hand_due(now, everything=True)

    def _hand_due(self, now: float, *, everything: bool = False) -> None:
        rows = self._book.take_due(now, everything=everything)
        if rows:
            if self.tee is not None:
                self.tee(rows)
            self._dispatch_to_slots(rows, self._log(_METRICS, rows))

    def _collect_instruments(self, now: float) -> None:
        try:
            self._reader.collect()
        except Exception:
            _logger.exception("collecting the run's instruments failed; their values wait for the next collection")
            return
        collected = self._instruments.take_rows()
        stepless = collected.pop(None, {})
        if stepless and not self._warned_stepless:
            self._warned_stepless = True
            _logger.warning(
                "metric points without a %s attribute (an integer from 0 to 2**53 - 1) (%s) belong to no step "
                "and are not uploaded; record them with the step attribute or log them with "
                "run.log_metrics(..., step=)",
                RUN_STEP,
                ", ".join(sorted(stepless)),
            )
        for step, values in collected.items():
            self._book.merge(values, now, step=step)

    def _encode_for_spool(self, items: Sequence[MetricsRow]) -> list[bytes]:
        return [compact_json(row) for row in items if row is not _COLLECT_ONLY]

    def _spill(self, kind: str, items: list[Any]) -> int:
        # A collection request is not a record: only rows the producer logged go to the spool.
        rows = [row for row in items if row is not _COLLECT_ONLY]
        return super()._spill(kind, rows) if rows else 0

    def _from_spool(self, records: list[SpooledRecord]) -> list[MetricsRow]:
        return [record.record for record in records]

    def close(self, timeout: float | None = 30.0) -> bool:
        closed = super().close(timeout)
        self.meter_provider.shutdown()
        return closed
