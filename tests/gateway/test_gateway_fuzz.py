"""Fuzzing both receivers of a real gateway: whatever arrives (random bytes, OTLP requests with random, huge,
non-finite, deeply nested or mistyped values, truncated or bit-flipped protobuf, OTLP/JSON with lone surrogates
and random subtrees, compressed or not) is answered without a server error (no HTTP 5xx but the documented 503,
no gRPC INTERNAL/UNKNOWN), and the gateway still answers afterwards."""

from __future__ import annotations

import base64
import gzip
import json
import math
import zlib
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, TraceFlags

from prime_otel import _conventions as conv
from tests.gateway._gateway import Gateway
from tests.gateway._wire import deep_span, field

EXAMPLES = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
INT64 = st.integers(-(2**63), 2**63 - 1)
SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
TEXT = st.text(max_size=12) | st.text(alphabet=SURROGATES, min_size=1, max_size=3)
SCALARS = st.none() | st.booleans() | INT64 | st.floats() | st.text(max_size=12) | st.binary(max_size=12)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=12,
)
SPAN_NAMES = st.sampled_from([conv.EPISODE_SPAN, conv.TRACE_SPAN, conv.RUN_END_SPAN, "step", ""])
ATTRIBUTE_KEYS = st.sampled_from(
    [
        conv.RECORD_JSON,
        conv.RECORD_MAP,
        conv.SAMPLES_JSON,
        conv.END_STATUS,
        conv.END_EPISODES,
        conv.END_TRACES,
        conv.END_METRIC_ROWS,
        conv.END_OWNER,
        conv.END_SUMMARY_JSON,
        conv.END_ERROR,
        conv.RUN_STEP,
    ]
)


def _deep_json(depth: int) -> str:
    return '{"id": "deep", "traces": [], "info": ' + "[" * depth + "]" * depth + "}"


RECORD_TEXT = (
    st.builds(lambda record: json.dumps(record), JSON_VALUES)
    | st.sampled_from(['{"id": "e", "traces": []}', "{", "[]", "null", '{"id": 7}'])
    | st.sampled_from([1, 50, 5_000, 100_000]).map(_deep_json)
)
ATTRIBUTE_VALUES = (
    VALUES | RECORD_TEXT | st.sampled_from([math.inf, -math.inf, math.nan, 2**63 - 1, -1, "7", "x" * 2_000_000])
)


@st.composite
def resources(draw: st.DrawFn) -> Resource:
    attributes: dict[str, Any] = {
        conv.RUN_ID: draw(st.sampled_from(["fuzz-run-a", "fuzz-run-b", "", "x" * 300]) | st.text(max_size=8)),
        conv.RUN_TYPE: draw(st.sampled_from(["eval", "train", "sideways"])),
    }
    if draw(st.booleans()):
        attributes[conv.RUN_RANK] = draw(INT64 | st.sampled_from(["1", "nope"]))
    if draw(st.booleans()):
        attributes[conv.RUN_WORLD_SIZE] = draw(INT64 | st.sampled_from([10**9, 2**62]))
    return Resource(attributes)


@st.composite
def spans(draw: st.DrawFn, resource: Resource) -> ReadableSpan:
    attributes = draw(st.dictionaries(ATTRIBUTE_KEYS | st.text(max_size=6), ATTRIBUTE_VALUES, max_size=5))
    trace_id = draw(st.integers(1, 2**128 - 1))
    span_id = draw(st.integers(1, 2**64 - 1))
    return ReadableSpan(
        name=draw(SPAN_NAMES),
        context=SpanContext(trace_id, span_id, False, TraceFlags(TraceFlags.SAMPLED)),
        resource=resource,
        attributes=attributes,
        start_time=draw(st.integers(0, 2**64 - 1)),
        end_time=draw(st.integers(0, 2**64 - 1)),
        instrumentation_scope=InstrumentationScope("fuzz"),
    )


@st.composite
def trace_requests(draw: st.DrawFn) -> bytes:
    """An OTLP trace request as protobuf bytes, sometimes with a too-deep span, truncated or bit-flipped."""
    resource = draw(resources())
    batch = draw(st.lists(spans(resource), min_size=1, max_size=4))
    try:
        body = encode_spans(batch).SerializeToString()
    except Exception:  # values the SDK's encoder refuses (out-of-range ints): send bytes of the rest
        body = encode_spans([]).SerializeToString()
    if draw(st.booleans()):
        body += field(1, field(2, field(2, deep_span(draw(st.sampled_from([20, 40, 1000]))))))
    mutation = draw(st.sampled_from(["none", "truncate", "flip"]))
    if mutation == "truncate" and body:
        body = body[: draw(st.integers(0, len(body) - 1))]
    elif mutation == "flip" and body:
        position = draw(st.integers(0, len(body) - 1))
        body = body[:position] + bytes([body[position] ^ draw(st.integers(1, 255))]) + body[position + 1 :]
    return body


def _hex_ids(document: Any) -> Any:
    if isinstance(document, dict):
        return {
            key: _b64_to_hex(value) if key in ("traceId", "spanId", "parentSpanId") else _hex_ids(value)
            for key, value in document.items()
        }
    if isinstance(document, list):
        return [_hex_ids(item) for item in document]
    return document


def _b64_to_hex(value: Any) -> Any:
    return base64.b64decode(value).hex() if isinstance(value, str) else value


@st.composite
def json_requests(draw: st.DrawFn) -> bytes:
    """An OTLP/JSON trace request with a random subtree replaced (lone surrogates, wrong types, deep lists)."""
    resource = draw(resources())
    batch = draw(st.lists(spans(resource), min_size=1, max_size=3))
    try:
        document = _hex_ids(json_format.MessageToDict(encode_spans(batch)))
    except Exception:
        document = {"resourceSpans": []}
    paths = list(_paths(document))
    if paths and draw(st.booleans()):
        parent, key = draw(st.sampled_from(paths))
        parent[key] = draw(JSON_VALUES | st.sampled_from([[[[[]]]], "\ud800", -(2**70), 1e308]))
    text = json.dumps(document)
    if draw(st.booleans()):
        text = text.replace('"', '"\\ud800', 1)
    return text.encode("utf-8", "surrogatepass")


def _paths(value: Any) -> Iterator[tuple[Any, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield value, key
            yield from _paths(item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield value, index
            yield from _paths(item)


ENCODINGS = st.sampled_from(["identity", "gzip", "deflate", "deflate-raw", "br"])


def _encode(body: bytes, encoding: str) -> tuple[bytes, str]:
    if encoding == "gzip":
        return gzip.compress(body), "gzip"
    if encoding == "deflate":
        return zlib.compress(body), "deflate"
    if encoding == "deflate-raw":
        raw = zlib.compressobj(wbits=-15)
        return raw.compress(body) + raw.flush(), "deflate"
    return body, encoding


@pytest.fixture(scope="module")
def client(gateway: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gateway.http_url, timeout=60) as session:
        yield session


@pytest.fixture(scope="module")
def channel(gateway: Gateway) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(gateway.grpc_endpoint) as opened:
        yield opened


def _post(client: httpx.Client, path: str, body: bytes, content_type: str, encoding: str) -> None:
    content, header = _encode(body, encoding)
    answer = client.post(path, content=content, headers={"Content-Type": content_type, "Content-Encoding": header})
    assert answer.status_code < 500 or answer.status_code == 503, (answer.status_code, answer.text[:500])


@EXAMPLES
@given(body=trace_requests(), encoding=ENCODINGS, path=st.sampled_from(["/v1/traces", "/v1/metrics", "/v1/logs"]))
def test_protobuf_bodies_never_answer_a_server_error(
    client: httpx.Client, body: bytes, encoding: str, path: str
) -> None:
    _post(client, path, body, "application/x-protobuf", encoding)


@EXAMPLES
@given(body=json_requests(), encoding=ENCODINGS)
def test_otlp_json_bodies_never_answer_a_server_error(client: httpx.Client, body: bytes, encoding: str) -> None:
    _post(client, "/v1/traces", body, "application/json", encoding)


@EXAMPLES
@given(body=st.binary(max_size=300), content_type=st.sampled_from(["application/x-protobuf", "application/json"]))
def test_random_bytes_never_answer_a_server_error(client: httpx.Client, body: bytes, content_type: str) -> None:
    _post(client, "/v1/traces", body, content_type, "identity")
    _post(client, "/v1/metrics", body, content_type, "gzip")


@EXAMPLES
@given(
    body=trace_requests() | st.binary(max_size=300),
    method=st.sampled_from(
        [
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
            "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
        ]
    ),
)
def test_grpc_requests_never_fail_inside_the_gateway(channel: grpc.Channel, body: bytes, method: str) -> None:
    export = channel.unary_unary(method, request_serializer=None, response_deserializer=None)
    try:
        export(body, timeout=60)
    except grpc.RpcError as exc:
        assert exc.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAVAILABLE), exc.details()


def test_the_gateway_still_answers_after_the_fuzzing(client: httpx.Client, gateway: Gateway) -> None:
    assert client.get("/healthz").json() == {"ok": True}
    fuzzed = [run for run_id, run in gateway.runs().items() if run_id.startswith("fuzz-run")]
    assert fuzzed, "no fuzzed request reached a run: the fuzzing exercised only the envelope"
    assert sum(run["invalid"] + run["rejected"] for run in fuzzed) > 0
