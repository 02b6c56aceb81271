"""A run whose uploads fell behind pushes back on its senders (503 + Retry-After over HTTP, UNAVAILABLE over
gRPC: both are retried by OTLP exporters and the Collector) instead of queueing without bound or dropping."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from starlette.testclient import TestClient

from prime_otel.gateway import RunRegistry, create_app
from prime_otel.gateway._grpc import start_grpc_server
from tests.gateway._producer import end_marker, record_span, run_resource
from tests.gateway._sinks import GatedPipelines, GatedSink


@pytest.fixture
def stalled() -> Iterator[tuple[RunRegistry, GatedSink]]:
    pipelines = GatedPipelines(max_queued_bytes=1)
    registry = RunRegistry(pipelines, lease_seconds=60)  # type: ignore[arg-type]
    yield registry, pipelines.sink
    pipelines.sink.gate.set()
    registry.stop(5)


def _body(run_id: str) -> bytes:
    record = {"id": "episode-1", "traces": []}
    return encode_spans([record_span(run_resource(run_id, "eval"), record)]).SerializeToString()


def _wait_until(predicate: Any) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_http_answers_503_with_retry_after_while_a_run_is_saturated(
    stalled: tuple[RunRegistry, GatedSink],
) -> None:
    registry, sink = stalled
    headers = {"Content-Type": "application/x-protobuf"}
    with TestClient(create_app(registry)) as client:
        assert client.post("/v1/traces", content=_body("run-a"), headers=headers).status_code == 200
        refused = client.post("/v1/traces", content=_body("run-a"), headers=headers)
        assert refused.status_code == 503
        assert refused.headers["Retry-After"] == "1"
        # Other runs are not held back by a saturated one.
        assert client.post("/v1/traces", content=_body("run-b"), headers=headers).status_code == 200
        sink.gate.set()
        _wait_until(lambda: len(sink.written) == 2)
        assert client.post("/v1/traces", content=_body("run-a"), headers=headers).status_code == 200
    _wait_until(lambda: len(sink.written) == 3)


def test_grpc_answers_unavailable_while_a_run_is_saturated(stalled: tuple[RunRegistry, GatedSink]) -> None:
    registry, sink = stalled
    server, port = start_grpc_server(registry, "127.0.0.1", 0)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = TraceServiceStub(channel)
        request = encode_spans([end_marker(run_resource("run-g", "eval"))])
        stub.Export(encode_spans([record_span(run_resource("run-g", "eval"), {"id": "e", "traces": []})]))
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(request)
        assert refused.value.code() is grpc.StatusCode.UNAVAILABLE
        sink.gate.set()
        _wait_until(lambda: len(sink.written) == 1)
        stub.Export(request)
    finally:
        channel.close()
        server.stop(None)
