"""The OTLP/gRPC receiver (what a Collector's ``loadbalancing`` exporter speaks), its receive limit raised to
128 MiB (gRPC's default is 4 MiB; episodes are large).

The services take the request as bytes and open it one span (metric, log record) at a time (``_envelope.py``),
so one undecodable span is refused alone instead of gRPC failing the whole request. Answers: ``UNAUTHENTICATED``
without an accepted token, ``INVALID_ARGUMENT`` for a broken envelope, ``UNAVAILABLE`` (retried by OTLP senders)
when the gateway is saturated.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ._auth import Authenticator, AuthError
from ._decode import MAX_BODY_BYTES, RequestError
from ._envelope import LOGS, METRICS, TRACES, split_protobuf
from ._outcome import Saturated
from ._registry import RunRegistry
from ._tls import TlsFiles

_WORKERS = 8
_TRACES_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_METRICS_SERVICE = "opentelemetry.proto.collector.metrics.v1.MetricsService"
_LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"

Behaviour = Callable[[bytes, str], Message]


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


def _export(authenticator: Authenticator, behaviour: Behaviour) -> Callable[[bytes, Any], Message]:
    def export(request: bytes, context: Any) -> Message:
        sender = _sender(authenticator, context)
        try:
            return behaviour(request, sender)
        except RequestError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, exc.message)
        except Saturated as exc:
            # UNAVAILABLE is what OTLP/gRPC senders (the SDK's and the Collector's exporters) retry.
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        raise AssertionError("unreachable: abort raises")

    return export


def _service(name: str, authenticator: Authenticator, behaviour: Behaviour) -> grpc.GenericRpcHandler:
    handler = grpc.unary_unary_rpc_method_handler(
        _export(authenticator, behaviour),
        request_deserializer=None,  # the request arrives as bytes
        response_serializer=lambda message: message.SerializeToString(),
    )
    return grpc.method_handlers_generic_handler(name, {"Export": handler})


def start_grpc_server(
    registry: RunRegistry,
    host: str,
    port: int,
    authenticator: Authenticator | None = None,
    tls: TlsFiles | None = None,
) -> tuple[grpc.Server, int]:
    """A started gRPC server and the port it bound (``port`` 0 picks a free one); TLS with ``tls``."""
    auth = authenticator or Authenticator()

    def traces(body: bytes, sender: str) -> Message:
        outcome = registry.accept_traces(split_protobuf(body, Span, TRACES), sender)
        return outcome.trace_response()

    def metrics(body: bytes, sender: str) -> Message:
        outcome = registry.accept_metrics(split_protobuf(body, Metric, METRICS), sender)
        return outcome.metrics_response()

    def logs(body: bytes, sender: str) -> Message:
        split_protobuf(body, LogRecord, LOGS)
        return ExportLogsServiceResponse()

    options = [
        ("grpc.max_receive_message_length", MAX_BODY_BYTES),
        ("grpc.max_send_message_length", MAX_BODY_BYTES),
    ]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=_WORKERS), options=options)
    server.add_generic_rpc_handlers(
        (
            _service(_TRACES_SERVICE, auth, traces),
            _service(_METRICS_SERVICE, auth, metrics),
            _service(_LOGS_SERVICE, auth, logs),
        )
    )
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
