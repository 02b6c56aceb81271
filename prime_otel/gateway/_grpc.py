"""The OTLP/gRPC receiver (what a Collector's ``loadbalancing`` exporter speaks), its receive limit raised to
128 MiB (gRPC's default is 4 MiB; episodes are large)."""

from __future__ import annotations

from concurrent import futures
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ._decode import MAX_BODY_BYTES
from ._registry import RunRegistry, Saturated

_WORKERS = 8


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, registry: RunRegistry) -> None:
        self._registry = registry

    def Export(self, request: ExportTraceServiceRequest, context: Any) -> ExportTraceServiceResponse:
        try:
            outcome = self._registry.accept_traces(request)
        except Saturated as exc:
            # UNAVAILABLE is what OTLP/gRPC senders (the SDK's and the Collector's exporters) retry.
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return outcome.trace_response()


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, registry: RunRegistry) -> None:
        self._registry = registry

    def Export(self, request: ExportMetricsServiceRequest, context: Any) -> ExportMetricsServiceResponse:
        try:
            outcome = self._registry.accept_metrics(request)
        except Saturated as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return outcome.metrics_response()


class _Logs(logs_service_pb2_grpc.LogsServiceServicer):
    def Export(self, request: ExportLogsServiceRequest, context: Any) -> ExportLogsServiceResponse:
        return ExportLogsServiceResponse()


def start_grpc_server(registry: RunRegistry, host: str, port: int) -> tuple[grpc.Server, int]:
    """A started gRPC server and the port it bound (``port`` 0 picks a free one)."""
    options = [
        ("grpc.max_receive_message_length", MAX_BODY_BYTES),
        ("grpc.max_send_message_length", MAX_BODY_BYTES),
    ]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=_WORKERS), options=options)
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(registry), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_Metrics(registry), server)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_Logs(), server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError as exc:  # grpcio raises where older releases returned 0
        raise OSError(f"could not bind the gRPC receiver to {address}: {exc}") from None
    if bound == 0:
        raise OSError(f"could not bind the gRPC receiver to {address}")
    server.start()
    return server, bound
