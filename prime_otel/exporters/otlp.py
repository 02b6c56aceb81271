"""The OTLP path: records and step metrics leave the process as OpenTelemetry data for a Collector and a
prime-otel gateway, which run the platform sinks (see ``_conventions`` for the attribute names).

The record travels as a compact JSON string, encoded once: an eval run's v0 sample rows are projected by the
gateway from the record (the same rows; the projection was the producer's second encoding of the same content),
a training run's travel with it (projected here, with this process's rollout numbers). With the exporters
``default_span_exporter`` builds, the record's JSON goes into the OTLP request as the bytes it is
(``_otlp_wire``); any other span exporter gets ``ReadableSpan``s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.metrics.export import (
    Gauge,
    Metric,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import RandomIdGenerator, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from .. import _conventions as conv
from .._sink import SinkStats
from ..client import suppressed_instrumentation
from ..errors import TransportError
from ..records import RecordSpan, compact_json, is_episode
from . import _otlp_wire as wire
from ._base import RecordExporter
from ._sample_rows import encode_samples

_SCOPE = InstrumentationScope("prime_otel")
_ids = RandomIdGenerator()
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_SCOPE_MESSAGE = wire.scope_message(_SCOPE.name)


def _as_text(value: wire.WireValue) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, tuple):
        return tuple(_as_text(item) for item in value)
    return value


class OtlpExportFailed(TransportError):
    """The OTLP exporter gave up (after its own retries): transient, so it costs a strike."""


def _protocol() -> str:
    return (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc"
    ).strip()


def default_span_exporter() -> SpanExporter:
    """The OTLP span exporter the standard ``OTEL_EXPORTER_OTLP_*`` variables describe (gRPC by default)."""
    # Imported here: gRPC and the HTTP exporter load only for a run that uses the OTLP path.
    if _protocol().startswith("http"):
        from ._otlp_senders import HttpEncodedSpanExporter

        return HttpEncodedSpanExporter()
    from ._otlp_senders import GrpcEncodedSpanExporter

    return GrpcEncodedSpanExporter()


def default_metric_exporter() -> MetricExporter:
    if _protocol().startswith("http"):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter

        return HttpMetricExporter()
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter()


class OtlpRecordSink(RecordExporter):
    """Record spans, with their record and sample rows as attributes, to an OTLP span exporter."""

    name = "otlp"

    def __init__(self, exporter: SpanExporter, resource: Resource) -> None:
        super().__init__()
        self._exporter = exporter
        self._resource = resource
        self._rollout_numbers: dict[Any, int] = {}
        self._resource_message: bytes | None = None
        self._kind = resource.attributes.get(conv.RUN_TYPE)
        self.sent = {conv.EPISODE_SPAN: 0, conv.TRACE_SPAN: 0}

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        exporter = self._exporter
        with suppressed_instrumentation():
            records = [span for span in spans if isinstance(span, RecordSpan)]
            export_encoded = getattr(exporter, "export_encoded", None)  # the exporters default_span_exporter builds
            if export_encoded is not None and len(records) == len(spans):
                result = export_encoded(self.encode_request(records), len(spans))
            else:
                result = exporter.export([self._with_record(span) for span in spans])
        if result is not SpanExportResult.SUCCESS:
            raise OtlpExportFailed(f"the OTLP exporter could not send {len(spans)} record spans")
        for span in spans:
            self.sent[span.name] = self.sent.get(span.name, 0) + 1
        self._count(delivered=len(spans), requests=1)

    def _record_attributes(self, span: RecordSpan) -> dict[str, wire.WireValue]:
        """The span's attributes with its record's JSON (and a training episode's rows), as UTF-8 bytes."""
        encoded = span.encoded()
        attributes: dict[str, wire.WireValue] = dict(span.attributes or {})  # type: ignore[arg-type]
        attributes[conv.RECORD_JSON] = encoded.plain
        record = span.record
        # An eval run's rows are projected by the gateway from the record (they hold nothing else); a training
        # run's keep the producer's rollout numbers, so they travel with the record.
        if self._kind == "train" and not isinstance(record, Mapping) and is_episode(record):
            rows = encode_samples([record], self._rollout_numbers, records=[encoded])
            if rows:
                attributes[conv.SAMPLES_JSON] = b"[" + b",".join(row.data for row in rows) + b"]"
        return attributes

    def encode_request(self, spans: Sequence[RecordSpan]) -> bytes:
        """The OTLP ``ExportTraceServiceRequest`` this sink sends for ``spans`` (numbering their rollouts)."""
        if self._resource_message is None:
            self._resource_message = wire.resource_message(self._resource.attributes)
        messages = [
            wire.span_message(
                wire.WireSpan(
                    trace_id=span.context.trace_id,
                    span_id=span.context.span_id,
                    name=span.name,
                    start_time_ns=span.start_time or 0,
                    end_time_ns=span.end_time or 0,
                    attributes=self._record_attributes(span),
                )
            )
            for span in spans
        ]
        return wire.export_request(self._resource_message, _SCOPE_MESSAGE, messages)

    def _with_record(self, span: ReadableSpan) -> ReadableSpan:
        if not isinstance(span, RecordSpan):
            return span
        attributes = {key: _as_text(value) for key, value in self._record_attributes(span).items()}
        return ReadableSpan(
            name=span.name,
            context=span.context,
            resource=self._resource,
            attributes=attributes,
            kind=SpanKind.INTERNAL,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=_SCOPE,
        )

    def send_end_marker(
        self, *, status: str, error: str | None, summary: Mapping[str, Any], metric_rows: int, owner: bool
    ) -> bool:
        """Tell the gateway what this process sent, so it closes the run only once all of it arrived."""
        attributes: dict[str, Any] = {
            conv.END_STATUS: status,
            conv.END_EPISODES: self.sent[conv.EPISODE_SPAN],
            conv.END_TRACES: self.sent[conv.TRACE_SPAN],
            conv.END_METRIC_ROWS: metric_rows,
            conv.END_OWNER: owner,
            conv.END_SUMMARY_JSON: compact_json(summary).decode("utf-8"),
        }
        if error:
            attributes[conv.END_ERROR] = error
        now = time.time_ns()
        marker = ReadableSpan(
            name=conv.RUN_END_SPAN,
            context=SpanContext(
                _ids.generate_trace_id(), _ids.generate_span_id(), False, TraceFlags(TraceFlags.SAMPLED)
            ),
            resource=self._resource,
            attributes=attributes,
            kind=SpanKind.INTERNAL,
            start_time=now,
            end_time=now,
            instrumentation_scope=_SCOPE,
        )
        try:
            with suppressed_instrumentation():
                return self._exporter.export([marker]) is SpanExportResult.SUCCESS
        finally:
            self._exporter.shutdown()

    def close(self) -> None:
        """The exporter stays open for the ``run.end`` marker, which is sent after the records drained."""


class OtlpMetricsSink:
    """Step rows as OTLP gauge points carrying ``prime.run.step``; the gateway rebuilds one row per step."""

    name = "otlp_metrics"

    def __init__(self, exporter: MetricExporter, resource: Resource) -> None:
        self.enabled = True
        self.stats = SinkStats()
        self._exporter = exporter
        self._resource = resource

    @property
    def quiet_off_reason(self) -> str | None:
        return None

    def write(self, items: Sequence[Any]) -> None:
        metrics: list[Metric] = []
        now = time.time_ns()
        for row in items:
            step = row.get("step")
            attributes = {conv.METRIC_STEP: step} if isinstance(step, int) else {}
            for name, value in row.items():
                if name in ("step", "_timestamp") or isinstance(value, bool) or not isinstance(value, (int, float)):
                    continue
                point = NumberDataPoint(
                    attributes=attributes, start_time_unix_nano=now, time_unix_nano=now, value=value
                )
                metrics.append(Metric(name=name, description=None, unit=None, data=Gauge(data_points=[point])))
        if not metrics:
            return
        data = MetricsData(resource_metrics=[ResourceMetrics(self._resource, [ScopeMetrics(_SCOPE, metrics, "")], "")])
        with suppressed_instrumentation():
            result = self._exporter.export(data)
        if result is not MetricExportResult.SUCCESS:
            raise OtlpExportFailed(f"the OTLP exporter could not send {len(items)} metric rows")
        self.stats.delivered += len(items)
        self.stats.requests += 1

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self._exporter.shutdown()

    def reset_after_fork(self) -> None:
        return None
