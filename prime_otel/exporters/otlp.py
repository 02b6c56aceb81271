"""The OTLP path: records and step metrics leave the process as OpenTelemetry data for a Collector and a
prime-otel gateway, which run the platform sinks (see ``_conventions`` for the attribute names).

The record travels as a compact JSON string, encoded once: an eval run's v0 sample rows are projected by the
gateway from the record (the same rows; the projection was the producer's second encoding of the same content),
a training run's travel with it (projected here, with this process's rollout numbers). With the exporters
``default_span_exporter`` builds, the record's JSON goes into the OTLP request as the bytes it is
(``_otlp_wire``); any other span exporter gets ``ReadableSpan``s.
"""

from __future__ import annotations

import importlib
import os
import threading
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
from opentelemetry.sdk.trace import Event, RandomIdGenerator, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from .. import _conventions as conv
from .._sink import MetricsRow, SinkStats
from ..client import suppressed_instrumentation
from ..errors import MissingExtraError, TransportError
from ..records import RecordSpan, compact_json, is_episode
from ..records._genai_view import genai_view
from . import _otlp_wire as wire
from ._base import RecordSink
from ._heartbeat import Heartbeat, heartbeat_interval
from ._sample_rows import encode_samples

_SCOPE = InstrumentationScope("prime_otel")
_ids = RandomIdGenerator()
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_SCOPE_MESSAGE = wire.scope_message(_SCOPE.name)
#: A span event as the wire writes it: name, time in ns, attributes.
_WireEvent = tuple[str, int, Mapping[str, wire.WireValue]]


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


def require_otlp_exporter() -> None:
    """Fails before a run is registered when the exporter the ``OTEL_EXPORTER_OTLP_*`` protocol asks for is absent."""
    flavour = "http" if _protocol().startswith("http") else "grpc"
    try:
        importlib.import_module(f"opentelemetry.exporter.otlp.proto.{flavour}.trace_exporter")
    except ModuleNotFoundError as missing:
        raise MissingExtraError('transport="otlp"', "otlp", missing) from None


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


class OtlpRecordSink(RecordSink):
    """Record spans, with their record and sample rows as attributes, to an OTLP span exporter."""

    name = "otlp"

    def __init__(self, exporter: SpanExporter, resource: Resource, heartbeat_seconds: float | None = None) -> None:
        super().__init__()
        self._exporter = exporter
        self._resource = resource
        self._rollout_numbers: dict[Any, int] = {}
        self._resource_message: bytes | None = None
        self._kind = resource.attributes.get(conv.RUN_TYPE)
        self.sent = {conv.EPISODE_SPAN: 0, conv.TRACE_SPAN: 0}
        # The heartbeat and the uploader share the exporter; one export at a time.
        self._export_lock = threading.Lock()
        interval = heartbeat_interval() if heartbeat_seconds is None else heartbeat_seconds
        self._heartbeat = Heartbeat(self._send_heartbeat, interval)
        self._heartbeat.start()

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        exporter = self._exporter
        with suppressed_instrumentation(), self._export_lock:
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

    def _outgoing(self, span: RecordSpan) -> tuple[dict[str, wire.WireValue], list[_WireEvent]]:
        """The span's attributes as it leaves the process (its flat attributes, the GenAI attributes any backend
        reads, the record's JSON as UTF-8 bytes, a training episode's rows) and one evaluation event per reward."""
        encoded = span.encoded()
        genai, events = genai_view(span.record, span.end_time or time.time_ns())
        attributes: dict[str, wire.WireValue] = {**genai, **(span.attributes or {})}  # type: ignore[dict-item]
        attributes[conv.RECORD_JSON] = encoded.plain
        record = span.record
        # An eval run's rows are projected by the gateway from the record (they hold nothing else); a training
        # run's keep the producer's rollout numbers, so they travel with the record.
        if self._kind == "train" and not isinstance(record, Mapping) and is_episode(record):
            rows = encode_samples([record], self._rollout_numbers, records=[encoded])
            if rows:
                attributes[conv.SAMPLES_JSON] = b"[" + b",".join(row.data for row in rows) + b"]"
        wire_events = [(event.name, event.timestamp, dict(event.attributes or {})) for event in events]
        return attributes, wire_events  # type: ignore[return-value]

    def encode_request(self, spans: Sequence[RecordSpan]) -> bytes:
        """The OTLP ``ExportTraceServiceRequest`` this sink sends for ``spans`` (numbering their rollouts)."""
        if self._resource_message is None:
            self._resource_message = wire.resource_message(self._resource.attributes)
        messages: list[list[bytes]] = []
        for span in spans:
            attributes, events = self._outgoing(span)
            wire_span = wire.WireSpan(
                trace_id=span.context.trace_id,
                span_id=span.context.span_id,
                name=span.name,
                start_time_ns=span.start_time or 0,
                end_time_ns=span.end_time or 0,
                attributes=attributes,
                events=events,
            )
            messages.append(wire.span_pieces(wire_span))
        return wire.export_request(self._resource_message, _SCOPE_MESSAGE, messages)

    def _with_record(self, span: ReadableSpan) -> ReadableSpan:
        if not isinstance(span, RecordSpan):
            return span
        attributes, events = self._outgoing(span)
        return ReadableSpan(
            name=span.name,
            context=span.context,
            resource=self._resource,
            attributes={key: _as_text(value) for key, value in attributes.items()},
            events=[Event(name, attributes, time_ns) for name, time_ns, attributes in events],
            kind=SpanKind.INTERNAL,
            start_time=span.start_time,
            end_time=span.end_time,
            instrumentation_scope=_SCOPE,
        )

    def send_end_marker(
        self, *, status: str, error: str | None, summary: Mapping[str, Any], metric_rows: int, owner: bool
    ) -> bool:
        """Tell the gateway what this process sent, so it closes the run only once all of it arrived."""
        self._heartbeat.stop()
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
            with suppressed_instrumentation(), self._export_lock:
                return self._exporter.export([marker]) is SpanExportResult.SUCCESS
        finally:
            self._exporter.shutdown()

    def _send_heartbeat(self) -> None:
        now = time.time_ns()
        beat = ReadableSpan(
            name=conv.HEARTBEAT_SPAN,
            context=SpanContext(
                _ids.generate_trace_id(), _ids.generate_span_id(), False, TraceFlags(TraceFlags.SAMPLED)
            ),
            resource=self._resource,
            attributes={},
            kind=SpanKind.INTERNAL,
            start_time=now,
            end_time=now,
            instrumentation_scope=_SCOPE,
        )
        with suppressed_instrumentation(), self._export_lock:
            self._exporter.export([beat])

    def close(self) -> None:
        """The exporter stays open for the ``run.end`` marker, which is sent after the records drained."""

    def reset_after_fork(self) -> None:
        super().reset_after_fork()
        self._export_lock = threading.Lock()
        self._heartbeat.forget_after_fork()


def record_span_out(span: RecordSpan, resource: Resource, samples_json: str | None = None) -> ReadableSpan:
    """A record span as it leaves the process: its flat attributes, the GenAI attributes and one evaluation event
    per reward that any backend reads, the record itself as JSON (and its v0 rows when the producer projected
    them)."""
    genai, events = genai_view(span.record, span.end_time or time.time_ns())
    attributes = {**genai, **(span.attributes or {})}
    attributes[conv.RECORD_JSON] = span.encoded().plain.decode("utf-8")
    if samples_json is not None:
        attributes[conv.SAMPLES_JSON] = samples_json
    return ReadableSpan(
        name=span.name,
        context=span.context,
        resource=resource,
        attributes=attributes,
        events=events,
        kind=SpanKind.INTERNAL,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=_SCOPE,
    )


class OtlpMetricsSink:
    """Step rows as OTLP gauge points carrying ``prime.run.step``; the gateway rebuilds one row per step."""

    name = "otlp_metrics"
    replay_safe = False
    reports_requests = False

    def __init__(self, exporter: MetricExporter, resource: Resource) -> None:
        self.enabled = True
        self.stats = SinkStats()
        self._exporter = exporter
        self._resource = resource

    @property
    def quiet_off_reason(self) -> str | None:
        return None

    def write(self, items: Sequence[MetricsRow]) -> None:
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
