"""The OTLP/HTTP receiver: ``POST /v1/traces``, ``/v1/metrics`` and ``/v1/logs`` (accepted, ignored), plus
``GET /healthz`` and ``GET /runs`` (what each run received and how it ended)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from ._auth import Authenticator, AuthError
from ._decode import JSON, MAX_BODY_BYTES, RequestError, decompress, encode_response, media_type
from ._envelope import LOGS, METRICS, TRACES, split_request
from ._outcome import Outcome, Saturated
from ._registry import RunRegistry

Handler = Callable[[bytes, str, str], Message]


def create_app(
    registry: RunRegistry, max_body_bytes: int = MAX_BODY_BYTES, authenticator: Authenticator | None = None
) -> Starlette:
    """The HTTP receiver; with ``authenticator`` requiring tokens, every route but ``/healthz`` needs one (the
    body of a request without one is never read)."""
    auth = authenticator or Authenticator()

    def traces(body: bytes, kind: str, sender: str) -> Message:
        outcome = registry.accept_traces(split_request(body, kind, Span, TRACES), sender)
        return outcome.trace_response()

    def metrics(body: bytes, kind: str, sender: str) -> Message:
        outcome: Outcome = registry.accept_metrics(split_request(body, kind, Metric, METRICS), sender)
        return outcome.metrics_response()

    def logs(body: bytes, kind: str, sender: str) -> Message:
        split_request(body, kind, LogRecord, LOGS)
        return ExportLogsServiceResponse()

    def endpoint(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def receive(request: Request) -> Response:
            try:
                sender = auth.sender(request.headers.get("authorization"))
            except AuthError as exc:
                return _unauthorized(str(exc), request)
            try:
                kind = media_type(request.headers.get("content-type"))
                raw = await _read_body(request, max_body_bytes)
                encoding = request.headers.get("content-encoding")
                message = await run_in_threadpool(
                    lambda: handler(decompress(raw, encoding, max_body_bytes), kind, sender)
                )
            except RequestError as exc:
                return _error(exc.status, exc.message, request)
            except Saturated as exc:
                response = _error(503, str(exc), request)
                response.headers["Retry-After"] = str(exc.retry_after)
                return response
            return Response(encode_response(message, kind), media_type=kind)

        return receive

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def runs(request: Request) -> Response:
        try:
            sender = auth.sender(request.headers.get("authorization"))
        except AuthError as exc:
            return _unauthorized(str(exc), request)
        return JSONResponse(await run_in_threadpool(registry.status, sender))

    return Starlette(
        routes=[
            Route("/v1/traces", endpoint(traces), methods=["POST"]),
            Route("/v1/metrics", endpoint(metrics), methods=["POST"]),
            Route("/v1/logs", endpoint(logs), methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/runs", runs, methods=["GET"]),
        ]
    )


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"the body exceeds {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestError(413, f"the body exceeds {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _unauthorized(message: str, request: Request) -> Response:
    response = _error(401, message, request)
    response.headers["WWW-Authenticate"] = 'Bearer realm="prime-otel gateway"'
    # The sender may still be writing a body the gateway will not read.
    response.headers["Connection"] = "close"
    return response


def _error(status: int, message: str, request: Request) -> Response:
    if (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower() == JSON:
        return JSONResponse({"code": status, "message": message}, status_code=status)
    return PlainTextResponse(message, status_code=status)
