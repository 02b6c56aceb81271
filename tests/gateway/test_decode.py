"""Decoding OTLP requests: protobuf and OTLP/JSON (hex ids, int64 as strings), gzip/deflate,
and the HTTP receiver's answers (same content type, 400 malformed, 415 unsupported, partial_success)."""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from starlette.testclient import TestClient

from prime_otel import _conventions as conv
from prime_otel._config import resolve_settings
from prime_otel.gateway import PipelineFactory, PipelineOptions, RunRegistry, create_app
from prime_otel.gateway._decode import JSON, PROTOBUF, RequestError, decompress
from prime_otel.gateway._envelope import TRACES, Invalid, split_request
from prime_otel.gateway._otlp import ReceivedSpan, ResourceSpans, spans_by_resource
from tests.gateway._producer import end_marker, run_resource

TRACE_ID = "5b8efff798038103d269b633813fc60c"
SPAN_ID = "eee19b7ec3c1b174"

OTLP_JSON = {
    "resourceSpans": [
        {
            "resource": {
                "attributes": [
                    {"key": "run.id", "value": {"stringValue": "run-json"}},
                    {"key": "run.type", "value": {"stringValue": "eval"}},
                    {"key": "prime.run.rank", "value": {"intValue": "1"}},
                    {"key": "prime.run.world_size", "value": {"intValue": "2"}},
                ]
            },
            "scopeSpans": [
                {
                    "scope": {"name": "producer"},
                    "spans": [
                        {
                            "traceId": TRACE_ID,
                            "spanId": SPAN_ID,
                            "parentSpanId": "",
                            "name": "episode",
                            "kind": 1,
                            "startTimeUnixNano": "1544712660000000000",
                            "endTimeUnixNano": "1544712661000000000",
                            "attributes": [
                                {"key": "prime.record.json", "value": {"stringValue": '{"id":"e1"}'}},
                                {"key": "prime.run.step", "value": {"intValue": "7"}},
                                {
                                    "key": "nested",
                                    "value": {"kvlistValue": {"values": [{"key": "a", "value": {"boolValue": True}}]}},
                                },
                            ],
                            "links": [{"traceId": TRACE_ID, "spanId": SPAN_ID}],
                            "status": {"code": 1},
                        }
                    ],
                }
            ],
        }
    ]
}


def _protobuf_request() -> ExportTraceServiceRequest:
    return encode_spans([end_marker(run_resource("run-pb", "eval"), episodes=2)])


def _spans(body: bytes, kind: str) -> list[ResourceSpans]:
    return spans_by_resource(split_request(body, kind, Span, TRACES))


def test_protobuf_requests_decode_to_the_run_and_its_spans() -> None:
    body = _protobuf_request().SerializeToString()
    (group,) = _spans(body, PROTOBUF)
    assert group.origin is not None
    assert (group.origin.run_id, group.origin.kind, group.origin.rank, group.origin.world_size) == (
        "run-pb",
        "eval",
        0,
        1,
    )
    (span,) = group.spans
    assert isinstance(span, ReceivedSpan)
    assert span.name == conv.RUN_END_SPAN
    assert span.attributes[conv.END_EPISODES] == 2
    assert len(span.span_id) == 24  # trace id + span id


def test_otlp_json_ids_are_hex_and_int64_are_strings() -> None:
    """A naive proto3-JSON parse would read the hex ids as base64 (24 bytes)."""
    body = json.dumps(OTLP_JSON).encode()
    (envelope,) = split_request(body, JSON, Span, TRACES)
    (span,) = envelope.items
    assert isinstance(span, Span)
    assert span.trace_id == bytes.fromhex(TRACE_ID)
    assert span.span_id == bytes.fromhex(SPAN_ID)
    assert span.links[0].span_id == bytes.fromhex(SPAN_ID)
    assert span.end_time_unix_nano == 1544712661000000000
    (group,) = _spans(body, JSON)
    assert group.origin is not None and (group.origin.rank, group.origin.world_size) == (1, 2)
    (received,) = group.spans
    assert isinstance(received, ReceivedSpan)
    assert received.attributes[conv.RUN_STEP] == 7
    assert received.attributes["nested"] == {"a": True}
    assert received.end_time_ns == 1544712661000000000


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xff\xff\xff",
        b"not a protobuf message",
    ],
)
def test_malformed_protobuf_is_a_400(body: bytes) -> None:
    with pytest.raises(RequestError) as caught:
        _spans(body, PROTOBUF)
    assert caught.value.status == 400


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[1, 2]",
        b"[" * 100_000 + b"]" * 100_000,
        json.dumps({"resourceSpans": "nope"}).encode(),
        json.dumps({"resourceSpans": [{"scopeSpans": 3}]}).encode(),
    ],
)
def test_a_malformed_json_envelope_is_a_400(body: bytes) -> None:
    with pytest.raises(RequestError) as caught:
        _spans(body, JSON)
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("span", "reason"),
    [
        ({"traceId": "zz", "spanId": SPAN_ID}, "id that is not an 8- or 16-byte hex string"),
        ({"traceId": TRACE_ID, "spanId": "abcd"}, "id that is not an 8- or 16-byte hex string"),
        ({"traceId": TRACE_ID, "spanId": SPAN_ID, "endTimeUnixNano": "soon"}, "invalid OTLP/JSON span"),
        ({"traceId": TRACE_ID}, "span without a 16-byte trace id and an 8-byte span id"),
        ("a string", "OTLP/JSON span is not an object"),
    ],
)
def test_a_bad_json_span_is_invalid_alone(span: object, reason: str) -> None:
    good = OTLP_JSON["resourceSpans"][0]["scopeSpans"][0]["spans"][0]  # type: ignore[index]
    document = json.loads(json.dumps(OTLP_JSON))
    document["resourceSpans"][0]["scopeSpans"][0]["spans"] = [good, span, good]
    (group,) = _spans(json.dumps(document).encode(), JSON)
    first, bad, last = group.spans
    assert isinstance(first, ReceivedSpan) and isinstance(last, ReceivedSpan)
    assert isinstance(bad, Invalid) and reason in bad.reason


def test_gzip_and_deflate_bodies_are_inflated() -> None:
    body = _protobuf_request().SerializeToString()
    assert decompress(gzip.compress(body), "gzip") == body
    assert decompress(zlib.compress(body), "deflate") == body
    raw = zlib.compressobj(wbits=-15)
    assert decompress(raw.compress(body) + raw.flush(), "deflate") == body
    assert decompress(body, None) == body


def test_broken_or_oversize_compressed_bodies_are_refused() -> None:
    body = gzip.compress(b"x" * 10_000)
    with pytest.raises(RequestError) as truncated:
        decompress(body[: len(body) // 2], "gzip")
    assert truncated.value.status == 400
    with pytest.raises(RequestError) as bomb:
        decompress(body, "gzip", limit=1000)
    assert bomb.value.status == 413
    with pytest.raises(RequestError) as unknown:
        decompress(body, "br")
    assert unknown.value.status == 415


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    """A receiver whose runs would go to an unreachable platform: only requests that open no run are sent."""
    settings = resolve_settings(api_key="unused", base_url="http://127.0.0.1:9")
    registry = RunRegistry(PipelineFactory(settings, PipelineOptions()), lease_seconds=60)
    with TestClient(create_app(registry)) as test_client:
        yield test_client


def test_http_answers_in_the_requests_content_type_with_partial_success(client: TestClient) -> None:
    document = json.loads(json.dumps(OTLP_JSON))
    document["resourceSpans"][0]["resource"]["attributes"] = []  # no run.id: nothing to deliver to
    answer = client.post("/v1/traces", content=json.dumps(document), headers={"Content-Type": JSON})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith(JSON)
    assert answer.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert "run.id" in answer.json()["partialSuccess"]["errorMessage"]

    request = ExportTraceServiceRequest()
    request.CopyFrom(_protobuf_request())
    request.resource_spans[0].resource.ClearField("attributes")
    body = gzip.compress(request.SerializeToString())
    answer = client.post("/v1/traces", content=body, headers={"Content-Type": PROTOBUF, "Content-Encoding": "gzip"})
    assert answer.status_code == 200
    assert answer.headers["content-type"] == PROTOBUF
    response = ExportTraceServiceResponse.FromString(answer.content)
    assert response.partial_success.rejected_spans == 1


def test_http_refuses_malformed_bodies_and_unknown_content_types(client: TestClient) -> None:
    assert client.post("/v1/traces", content=b"\xff\xff", headers={"Content-Type": PROTOBUF}).status_code == 400
    assert client.post("/v1/metrics", content=b"{oops", headers={"Content-Type": JSON}).status_code == 400
    assert (
        client.post(
            "/v1/traces", content=b"\x1f\x8b", headers={"Content-Type": PROTOBUF, "Content-Encoding": "gzip"}
        ).status_code
        == 400
    )
    assert client.post("/v1/traces", content=b"x", headers={"Content-Type": "text/plain"}).status_code == 415


def test_http_takes_and_ignores_logs(client: TestClient) -> None:
    answer = client.post("/v1/logs", content=b"{}", headers={"Content-Type": JSON})
    assert answer.status_code == 200 and answer.json() == {}
    assert client.get("/healthz").json() == {"ok": True}
    assert client.get("/runs").json() == []
