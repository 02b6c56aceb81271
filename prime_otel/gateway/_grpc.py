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

from ._auth import Authenticator, AuthError
from ._decode import MAX_BODY_BYTES
from ._registry import RunRegistry, Saturated
from ._tls import TlsFiles

_WORKERS = 8


def _sender(authenticator: Authenticator, context: Any) -> str:
    """The request's sender from its ``authorization`` metadata; aborts with ``UNAUTHENTICATED`` without one."""
    authorization = next(
        (value for key, value in context.invocation_metadata() if key == "authorization" and isinstance(value, str)),
        None,
    )
    try:
        return authenticator.sender(authorization)
    except AuthError as exc:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
        raise  # abort raises; this line is for the type checker


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, registry: RunRegistry, authenticator: Authenticator) -> None:
        self._registry = registry
        self._authenticator = authenticator

    def Export(self, request: ExportTraceServiceRequest, context: Any) -> ExportTraceServiceResponse:
        sender = _sender(self._authenticator, context)
        try:
            outcome = self._registry.accept_traces(request, sender)
        except Saturated as exc:
            # UNAVAILABLE is what OTLP/gRPC senders (the SDK's and the Collector's exporters) retry.
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        response = ExportTraceServiceResponse()
        if outcome.rejected:
            response.partial_success.rejected_spans = outcome.rejected
            response.partial_success.error_message = outcome.message
        return response


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, registry: RunRegistry, authenticator: Authenticator) -> None:
        self._registry = registry
        self._authenticator = authenticator

    def Export(self, request: ExportMetricsServiceRequest, context: Any) -> ExportMetricsServiceResponse:
        sender = _sender(self._authenticator, context)
        try:
            outcome = self._registry.accept_metrics(request, sender)
        except Saturated as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        response = ExportMetricsServiceResponse()
        if outcome.rejected:
            response.partial_success.rejected_data_points = outcome.rejected
            response.partial_success.error_message = outcome.message
        return response


class _Logs(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, authenticator: Authenticator) -> None:
        self._authenticator = authenticator

    def Export(self, request: ExportLogsServiceRequest, context: Any) -> ExportLogsServiceResponse:
        _sender(self._authenticator, context)
        return ExportLogsServiceResponse()


def start_grpc_server(
    registry: RunRegistry,
    host: str,
    port: int,
    authenticator: Authenticator | None = None,
    tls: TlsFiles | None = None,
) -> tuple[grpc.Server, int]:
    """A started gRPC server and the port it bound (``port`` 0 picks a free one); TLS with ``tls``."""
    auth = authenticator or Authenticator()
    options = [
        ("grpc.max_receive_message_length", MAX_BODY_BYTES),
        ("grpc.max_send_message_length", MAX_BODY_BYTES),
    ]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=_WORKERS), options=options)
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(registry, auth), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_Metrics(registry, auth), server)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_Logs(auth), server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        if tls is None:
            bound = server.add_insecure_port(address)
        else:
            credentials = grpc.ssl_server_credentials([(tls.key.read_bytes(), tls.cert.read_bytes())])
            bound = server.add_secure_port(address, credentials)
    except RuntimeError as exc:  # grpcio raises where older releases returned 0
        raise OSError(f"could not bind the gRPC receiver to {address}: {exc}") from None
    if bound == 0:
        raise OSError(f"could not bind the gRPC receiver to {address}")
    server.start()
    return server, bound
