"""One OpenTelemetry metrics collection as step rows ``{name: value}``: what a collection of the run's meter
becomes before the metrics uploader hands each row to its sinks.

Every instrument is aggregated with DELTA temporality, so a collection holds exactly what was measured
since the previous step (CUMULATIVE would re-send every past step).
"""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry.sdk.metrics import (
    Counter,
    Histogram,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
    _Gauge,
)
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    HistogramDataPoint,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    NumberDataPoint,
)

from .._conventions import RUN_STEP
from ._metric_values import MAX_STEP, histogram_value, point_value

_DELTA = AggregationTemporality.DELTA
ALL_DELTA: dict[type, AggregationTemporality] = {
    Counter: _DELTA,
    UpDownCounter: _DELTA,
    Histogram: _DELTA,
    _Gauge: _DELTA,
    ObservableCounter: _DELTA,
    ObservableUpDownCounter: _DELTA,
    ObservableGauge: _DELTA,
}


class StepRowExporter(MetricExporter):
    """Turns one collection into rows ``{name: value}``, one per ``prime.run.step`` attribute value (None for
    points without one, or whose step is not an integer from 0 to 2**53 - 1); a histogram contributes its mean,
    an integer gauge or counter its integer."""

    def __init__(self) -> None:
        super().__init__(preferred_temporality=ALL_DELTA)
        self._lock = threading.Lock()
        self._rows: dict[int | None, dict[str, int | float]] = {}

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        with self._lock:
            for resource_metrics in metrics_data.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        for point in metric.data.data_points:
                            value = _point_value(point)
                            if value is not None:
                                self._rows.setdefault(_step_of(point), {})[metric.name] = value
        return MetricExportResult.SUCCESS

    def take_rows(self) -> dict[int | None, dict[str, int | float]]:
        with self._lock:
            rows, self._rows = self._rows, {}
        return rows

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def _step_of(point: Any) -> int | None:
    step = (point.attributes or {}).get(RUN_STEP)
    return step if type(step) is int and 0 <= step < MAX_STEP else None


def _point_value(point: Any) -> int | float | None:
    if isinstance(point, NumberDataPoint):
        return point_value(point.value)
    if isinstance(point, HistogramDataPoint):
        return histogram_value(point.sum, point.count)
    return None
