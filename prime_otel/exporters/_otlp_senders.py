"""The SDK's OTLP span exporters (gRPC and HTTP, configured by the standard ``OTEL_EXPORTER_OTLP_*`` variables,
with their retries, TLS, headers and compression) taught to send a request that is already encoded
(``export_encoded(body, spans)``: one encoded ``ExportTraceServiceRequest`` holding ``spans`` spans), so record
spans skip the SDK's generic encoding. Every other span goes the SDK's way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

_EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


class _EncodedRequest:
    """An encoded request in place of the span list the SDK's gRPC exporter counts, translates and sends."""

    __slots__ = ("body", "spans")

    def __init__(self, body: bytes, spans: int) -> None:
        self.body = body
        self.spans = spans

    def __len__(self) -> int:
        return self.spans


def _serialize(request: Any) -> bytes:
    return request.body if isinstance(request, _EncodedRequest) else bytes(request.SerializeToString())


class _TraceStub:
    """``TraceServiceStub`` whose serializer passes an encoded request through as it is."""

    def __init__(self, channel: Any) -> None:
        self.Export = channel.unary_unary(
            _EXPORT_METHOD, request_serializer=_serialize, response_deserializer=ExportTraceServiceResponse.FromString
        )


class GrpcEncodedSpanExporter(GrpcSpanExporter):
    def _initialize_channel_and_stub(self) -> None:
        super()._initialize_channel_and_stub()
        self._client = _TraceStub(self._channel)  # type: ignore[assignment]

    def _translate_data(self, data: Sequence[ReadableSpan]) -> Any:
        return data if isinstance(data, _EncodedRequest) else super()._translate_data(data)

    def export_encoded(self, body: bytes, spans: int) -> SpanExportResult:
        return self._export(_EncodedRequest(body, spans))  # type: ignore[arg-type]


class HttpEncodedSpanExporter(HttpSpanExporter):
    def export_encoded(self, body: bytes, spans: int) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        with self._metrics.export_operation(spans) as result:
            sent = self._client.export(body)
            if not sent.success:
                result.error = sent.error
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS
