"""The gateway's bounds: a world size or rank above the cap is refused (and cannot exhaust the reaper: other runs
still close), a request that would open one run too many or queue past the gateway-wide bound is answered 503 +
Retry-After (gRPC UNAVAILABLE) until room is made, and a deflate bomb is a 413."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from starlette.testclient import TestClient

from prime_otel.gateway import RunRegistry, create_app
from prime_otel.gateway._grpc import start_grpc_server
from prime_otel.gateway._limits import GatewayLimits
from tests._waiting import wait_for
from tests.gateway._producer import end_marker, record_span, run_resource
from tests.gateway._sinks import GatedPipelines

PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture
def pipelines() -> Iterator[GatedPipelines]:
    made = GatedPipelines()
    yield made
    made.sink.gate.set()


def registry_with(pipelines: GatedPipelines, **limits: int) -> RunRegistry:
    registry = RunRegistry(pipelines, lease_seconds=60, limits=GatewayLimits(**limits))  # type: ignore[arg-type]
    registry.start()
    return registry


def episode_body(run_id: str, record_id: str = "episode-1", **resource: int) -> bytes:
    record = {"id": record_id, "traces": [], "padding": "x" * 2000}
    return encode_spans([record_span(run_resource(run_id, "eval", **resource), record)]).SerializeToString()


def test_a_world_size_or_rank_above_the_cap_is_refused_and_other_runs_still_close(pipelines: GatedPipelines) -> None:
    pipelines.sink.gate.set()
    registry = registry_with(pipelines, max_world_size=8)
    try:
        with TestClient(create_app(registry)) as client:
            for resource in ({"world_size": 10**9}, {"rank": 2**62}):
                answer = client.post("/v1/traces", content=episode_body("run-huge", **resource), headers=PROTOBUF)
                assert answer.status_code == 200
                partial = ExportTraceServiceResponse.FromString(answer.content).partial_success
                assert partial.rejected_spans == 1 and "above this gateway's cap of 8" in partial.error_message
            assert client.get("/runs").json() == []

            resource = run_resource("run-fine", "eval", world_size=8)
            spans = [record_span(resource, {"id": "e1", "traces": []}), end_marker(resource, episodes=1)]
            for rank in range(1, 8):
                spans.append(end_marker(run_resource("run-fine", "eval", rank=rank, world_size=8), owner=False))
            answer = client.post("/v1/traces", content=encode_spans(spans).SerializeToString(), headers=PROTOBUF)
            assert answer.status_code == 200
            wait_for(lambda: ("run-fine", "completed") in pipelines.backend.finalized, "run-fine to end", timeout=10)
    finally:
        registry.stop(5)


def test_one_run_too_many_waits_with_503_until_a_run_closes(pipelines: GatedPipelines) -> None:
    pipelines.sink.gate.set()
    registry = registry_with(pipelines, max_open_runs=2)
    try:
        with TestClient(create_app(registry)) as client:
            for run_id in ("run-1", "run-2"):
                assert client.post("/v1/traces", content=episode_body(run_id), headers=PROTOBUF).status_code == 200
            refused = client.post("/v1/traces", content=episode_body("run-3"), headers=PROTOBUF)
            assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
            assert "2 open runs" in refused.text
            # Data for runs already open still gets in.
            assert client.post("/v1/traces", content=episode_body("run-1", "e2"), headers=PROTOBUF).status_code == 200

            end = encode_spans([end_marker(run_resource("run-2", "eval"), episodes=1)]).SerializeToString()
            assert client.post("/v1/traces", content=end, headers=PROTOBUF).status_code == 200
            wait_for(lambda: ("run-2", "completed") in pipelines.backend.finalized, "run-2 to complete", timeout=10)
            wait_for(
                lambda: client.post("/v1/traces", content=episode_body("run-3"), headers=PROTOBUF).status_code == 200,
                "a new run to be taken once one closed",
                timeout=10,
            )
    finally:
        registry.stop(5)


def test_records_queued_past_the_gateway_wide_bound_answer_503_and_grpc_unavailable(pipelines: GatedPipelines) -> None:
    registry = registry_with(pipelines, max_queued_bytes=1500)
    server, port = start_grpc_server(registry, "127.0.0.1", 0)
    try:
        with TestClient(create_app(registry)) as client, grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            assert client.post("/v1/traces", content=episode_body("run-a"), headers=PROTOBUF).status_code == 200
            # run-b has room of its own, but the gateway as a whole holds more than its bound.
            refused = client.post("/v1/traces", content=episode_body("run-b"), headers=PROTOBUF)
            assert refused.status_code == 503 and "the gateway has more queued" in refused.text
            stub = TraceServiceStub(channel)
            request = encode_spans([record_span(run_resource("run-c", "eval"), {"id": "c", "traces": []})])
            with pytest.raises(grpc.RpcError) as unavailable:
                stub.Export(request, timeout=10)
            assert unavailable.value.code() is grpc.StatusCode.UNAVAILABLE
            pipelines.sink.gate.set()
            wait_for(lambda: len(pipelines.sink.written) == 1, "the record to be written", timeout=10)
            wait_for(lambda: registry.queued_bytes() == 0, "the queue to empty", timeout=10)
            assert client.post("/v1/traces", content=episode_body("run-b"), headers=PROTOBUF).status_code == 200
            stub.Export(request, timeout=10)
    finally:
        server.stop(None)
        registry.stop(5)


def test_a_deflate_bomb_is_413_not_400(pipelines: GatedPipelines) -> None:
    registry = registry_with(pipelines)
    bomb = zlib.compress(b"\0" * (2 * 1024 * 1024))
    try:
        with TestClient(create_app(registry, max_body_bytes=1024 * 1024)) as client:
            for encoding in ("deflate", "gzip"):
                body = bomb if encoding == "deflate" else _gzip(b"\0" * (2 * 1024 * 1024))
                answer = client.post("/v1/traces", content=body, headers={**PROTOBUF, "Content-Encoding": encoding})
                assert answer.status_code == 413, encoding
            assert client.get("/runs").json() == []
    finally:
        registry.stop(5)


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data)
