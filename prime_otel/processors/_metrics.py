"""The metrics uploader: ``log_metrics`` rows, collected through an OpenTelemetry meter, one export per step.

``log_metrics`` only queues the checked values, plain numbers already (a few µs on the caller's thread).
The uploader thread records them into gauges of the run's meter, collects once, and merges what the
producer's own instruments measured since the previous step into the same row.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
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
from ._uploader import Uploader

_logger = logging.getLogger(__name__)
_METRICS = "metrics"
_COLLECT_ONLY: Mapping[str, Any] = {}


class StepMetricsUploader(Uploader[MetricsRow]):
    """Owns the run's ``MeterProvider``; exports happen only when a step is logged (no periodic thread)."""

    def __init__(
        self, slots: Sequence[SinkSlot[MetricsRow]], resource: Resource, spool: RunSpool | None = None
    ) -> None:
        super().__init__(slots, thread_name="prime-otel-metrics", spool=spool)
        self._rows = StepRowExporter()
        self._reader = PeriodicExportingMetricReader(self._rows, export_interval_millis=math.inf)
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[self._reader], shutdown_on_exit=False)
        self._meter: Meter = self.meter_provider.get_meter("prime_otel.run")
        self._gauges: dict[str, Any] = {}
        self._warned_stepless = False

    def submit(self, row: dict[str, Any]) -> bool:
        return self._put(_METRICS, [row])

    def collect(self) -> bool:
        """Export what the producer's own instruments measured (points carrying ``prime.run.step``)."""
        return self._put(_METRICS, [_COLLECT_ONLY])

    def _deliver(self, items: list[Any]) -> None:
        rows: list[dict[str, Any]] = []
        for values in items:
            rows.extend(self._collect_step(values))
        if rows:
            self._dispatch_to_slots(rows, self._log(_METRICS, rows))

    def _encode_for_spool(self, items: Sequence[MetricsRow]) -> list[bytes]:
        return [compact_json(row) for row in items if row is not _COLLECT_ONLY]

    def _spill(self, kind: str, items: list[Any]) -> int:
        # A collection request is not a record: only rows the producer logged go to the spool.
        rows = [row for row in items if row is not _COLLECT_ONLY]
        return super()._spill(kind, rows) if rows else 0

    def _from_spool(self, records: list[SpooledRecord]) -> list[MetricsRow]:
        return [record.record for record in records]

    def _collect_step(self, values: Mapping[str, Any]) -> list[dict[str, Any]]:
        extra = {}
        for name, value in values.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and name not in ("step", "_timestamp"):
                self._gauge(name).set(value)
            else:
                extra[name] = value
        self._reader.collect()
        collected = self._rows.take_rows()
        own = collected.pop(None, {})
        if values is not _COLLECT_ONLY:
            rows = [{**own, **extra}]
        else:
            rows = []
            if own and not self._warned_stepless:
                self._warned_stepless = True
                _logger.warning(
                    "metric points without a %s attribute (an integer from 0 to 2**53 - 1) (%s) belong to no step "
                    "and are not uploaded; record them with the step attribute or log them with "
                    "run.log_metrics(..., step=)",
                    RUN_STEP,
                    ", ".join(sorted(own)),
                )
        now = time.time()
        rows.extend({**row, "step": step, "_timestamp": now} for step, row in sorted(collected.items()))
        return rows

    def _gauge(self, name: str) -> Any:
        gauge = self._gauges.get(name)
        if gauge is None:
            gauge = self._gauges[name] = self._meter.create_gauge(name)
        return gauge

    def close(self, timeout: float | None = 30.0) -> bool:
        closed = super().close(timeout)
        self.meter_provider.shutdown()
        return closed
