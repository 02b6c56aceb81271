"""OpenTelemetry metrics collections as step rows ``{name: value}``: what the run's meter measured for each step,
before the metrics uploader merges it into that step's row.

Every instrument is aggregated with DELTA temporality, so a collection holds exactly what was measured since the
previous one (CUMULATIVE would re-send every past step). A step's measurements may straddle any number of
collections (every ``log_metrics`` and flush may collect), so values are accumulated per step across them: a
counter's step value is the sum of all its increments in that step, a histogram's the mean over all its recordings
in that step, a gauge's its last value. A row carries the step's value so far, never a part of it, so a later row
of the same step replaces an earlier one with the larger, complete value, never a smaller one.
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
    Gauge,
    HistogramDataPoint,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    NumberDataPoint,
    Sum,
)
from opentelemetry.sdk.metrics.export import Histogram as HistogramData

from .._conventions import RUN_STEP
from ._metric_values import histogram_value, point_value, step_number

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
#: Steps whose accumulated instrument values are kept (the newest by number); a measurement for an older step
#: starts that step's value over.
KEPT_STEPS = 4096
_SUM, _MEAN, _LAST = "sum", "mean", "last"


class _StepValue:
    """One instrument's value in one step, accumulated over collections."""

    __slots__ = ("count", "kind", "total")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.total: int | float = 0
        self.count = 0

    def add(self, point: NumberDataPoint | HistogramDataPoint) -> None:
        if isinstance(point, HistogramDataPoint):
            self.total += point.sum
            self.count += point.count
        elif self.kind == _SUM:
            self.total += point.value
            self.count += 1
        else:
            self.total, self.count = point.value, 1

    def value(self) -> int | float | None:
        if self.kind == _MEAN:
            return histogram_value(self.total, self.count)
        return point_value(self.total)


class StepRowExporter(MetricExporter):
    """Turns collections into rows ``{name: value}``, one per ``prime.run.step`` attribute value (None for points
    without one, or whose step is not an integer from 0 to 2**53 - 1): each row holds the step's accumulated value
    of every instrument measured in it since the last :meth:`take_rows`."""

    def __init__(self, kept_steps: int = KEPT_STEPS) -> None:
        super().__init__(preferred_temporality=ALL_DELTA)
        self._lock = threading.Lock()
        self._kept_steps = kept_steps
        self._values: dict[int, dict[str, _StepValue]] = {}
        self._touched: dict[int | None, set[str]] = {}

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        with self._lock:
            for resource_metrics in metrics_data.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        kind = _kind_of(metric.data)
                        if kind is not None:
                            for point in metric.data.data_points:
                                self._add(metric.name, kind, point)
            self._forget_old_steps()
        return MetricExportResult.SUCCESS

    def _add(self, name: str, kind: str, point: Any) -> None:
        if not isinstance(point, (NumberDataPoint, HistogramDataPoint)):
            return
        step = _step_of(point)
        self._touched.setdefault(step, set()).add(name)
        if step is None:
            return  # belongs to no row; the name is kept for a warning
        values = self._values.setdefault(step, {})
        value = values.get(name)
        if value is None or value.kind != kind:
            value = values[name] = _StepValue(kind)
        value.add(point)

    def _forget_old_steps(self) -> None:
        excess = len(self._values) - self._kept_steps
        if excess > 0:
            for step in sorted(self._values)[:excess]:
                del self._values[step]

    def take_rows(self) -> dict[int | None, dict[str, int | float | None]]:
        """The rows of the steps measured since the last call, each instrument at its value in the step so far;
        under None the names of stepless points (their values are not kept)."""
        with self._lock:
            touched, self._touched = self._touched, {}
            rows: dict[int | None, dict[str, int | float | None]] = {}
            for step, names in touched.items():
                if step is None:
                    rows[None] = dict.fromkeys(sorted(names))
                    continue
                values = self._values.get(step, {})
                row = {name: values[name].value() for name in names if name in values}
                row = {name: value for name, value in row.items() if value is not None}
                if row:
                    rows[step] = row
        return rows

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def _kind_of(data: Any) -> str | None:
    if isinstance(data, Sum):
        return _SUM if data.aggregation_temporality is AggregationTemporality.DELTA else _LAST
    if isinstance(data, HistogramData):
        return _MEAN
    if isinstance(data, Gauge):
        return _LAST
    return None


def _step_of(point: Any) -> int | None:
    return step_number((point.attributes or {}).get(RUN_STEP))
