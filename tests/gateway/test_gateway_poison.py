"""One bad span costs only itself, on both receivers of a real gateway: a span nested deeper than protobuf parses,
a ``run.end`` marker with an infinite count, a record nested 100,000 deep are refused and counted invalid (with
why, in ``/runs`` and in the run's summary) while the good episodes of the same request land; a refused marker's
span id is not remembered, so the sender's corrected retry ends the run; no body answers 500."""

from __future__ import annotations

import json
from typing import Any

import grpc
import httpx
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext

from prime_otel import _conventions as conv
from prime_otel.testing import LocalPlatform
from tests._waiting import wait_for
from tests.gateway._gateway import Gateway, create_run
from tests.gateway._producer import end_marker, episode_spans, fresh_episodes, record_span, run_resource
from tests.gateway._wire import DEPTH, request_with_deep_span

PROTOBUF = {"Content-Type": "application/x-protobuf"}


def with_attributes(span: ReadableSpan, attributes: dict[str, Any], context: SpanContext | None = None) -> ReadableSpan:
    """A copy of ``span`` with ``attributes`` set over its own (and ``context``, to send the same span again)."""
    return ReadableSpan(
        name=span.name,
        context=context or span.context,
        resource=span.resource,
        attributes={**(span.attributes or {}), **attributes},
        kind=span.kind,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def same_span(original: ReadableSpan, replacement: ReadableSpan) -> ReadableSpan:
    return with_attributes(replacement, {}, context=original.context)


def refused(answer_body: bytes) -> tuple[int, str]:
    partial = ExportTraceServiceResponse.FromString(answer_body).partial_success
    return partial.rejected_spans, partial.error_message


def test_bad_spans_are_counted_alone_and_a_refused_marker_can_be_sent_again(
    platform: LocalPlatform, gateway: Gateway
) -> None:
    run_id = create_run(platform, "eval", "poison-http")
    resource = run_resource(run_id, "eval")
    episodes = fresh_episodes("eval", 3)
    infinite = end_marker(resource, episodes=float("inf"))  # type: ignore[arg-type]
    body = request_with_deep_span([*episode_spans(episodes, resource), infinite])

    answer = httpx.post(f"{gateway.http_url}/v1/traces", content=body, headers=PROTOBUF, timeout=30)
    assert answer.status_code == 200
    rejected, message = refused(answer.content)
    assert rejected == 2 and "undecodable span" in message and "record count" in message
    held = gateway.runs()[run_id]
    assert held["received"]["0"]["episodes"] == 3 and held["markers"] == {} and held["state"] == "open"
    assert held["invalid"] == 2
    assert set(held["invalid_reasons"]) == {
        "undecodable span (malformed, too deeply nested or not UTF-8)",
        "a run.end record count that is not a non-negative integer",
    }

    # The exporter's retry of the marker, corrected, carries the same span id: it is not taken for a replay.
    corrected = same_span(infinite, end_marker(resource, episodes=3, summary={"avg_reward": 0.25}))
    retry = httpx.post(
        f"{gateway.http_url}/v1/traces", content=encode_spans([corrected]).SerializeToString(), headers=PROTOBUF
    )
    assert retry.status_code == 200 and refused(retry.content) == (0, "")
    closed = gateway.wait_closed(run_id)
    assert closed["status"] == "completed" and closed["duplicates"] == 0
    landed = sorted(episode["id"] for episode in platform.inspect.episodes(run_id)["items"])
    assert landed == sorted(episode.id for episode in episodes)
    summary = platform.inspect.run(run_id)["summary"]
    assert summary["avg_reward"] == 0.25
    assert summary["prime_runs"]["invalid_records"] == held["invalid_reasons"]


def test_over_grpc_a_deep_record_and_an_undecodable_span_cost_only_themselves(
    platform: LocalPlatform, gateway: Gateway
) -> None:
    run_id = create_run(platform, "eval", "poison-grpc")
    resource = run_resource(run_id, "eval")
    episodes = fresh_episodes("eval", 2)
    deep_record = '{"id": "deep", "traces": [], "info": ' + "[" * DEPTH + "]" * DEPTH + "}"
    carrier = record_span(resource, {"id": "placeholder", "traces": []})
    spans = [*episode_spans(episodes, resource), with_attributes(carrier, {conv.RECORD_JSON: deep_record})]
    spans.append(end_marker(resource, episodes=3))
    body = request_with_deep_span(spans)
    with grpc.insecure_channel(gateway.grpc_endpoint) as channel:
        export = channel.unary_unary(
            "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
            request_serializer=None,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )
        answer = export(body, timeout=30)
        assert answer.partial_success.rejected_spans == 1
        with pytest.raises(grpc.RpcError) as broken:
            export(b"\x0a\xff\xff\xff\xff\x0f", timeout=10)  # a resource group longer than the request
        assert broken.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    closed = gateway.wait_closed(run_id)
    # The deep record arrived (the marker's count is met) but reached no sink: counted invalid, not lost silently.
    assert closed["status"] == "completed" and closed["missing"] == 0
    assert closed["invalid_reasons"] == {
        "undecodable span (malformed, too deeply nested or not UTF-8)": 1,
        "episode record JSON nested too deeply": 1,
    }
    landed = sorted(episode["id"] for episode in platform.inspect.episodes(run_id)["items"])
    assert landed == sorted(episode.id for episode in episodes)


def test_bodies_too_deep_or_broken_answer_4xx_and_the_gateway_still_serves(gateway: Gateway) -> None:
    deep_json = b'{"resourceSpans": ' + b"[" * DEPTH + b"]" * DEPTH + b"}"
    json_headers = {"Content-Type": "application/json"}
    answers = [
        httpx.post(f"{gateway.http_url}/v1/traces", content=deep_json, headers=json_headers),
        httpx.post(f"{gateway.http_url}/v1/metrics", content=deep_json, headers=json_headers),
        httpx.post(f"{gateway.http_url}/v1/logs", content=deep_json, headers=json_headers),
        httpx.post(f"{gateway.http_url}/v1/traces", content=json.dumps({"resourceSpans": 7}), headers=json_headers),
        httpx.post(f"{gateway.http_url}/v1/traces", content=b"\x0a\x05\x12", headers=PROTOBUF),
    ]
    assert [answer.status_code for answer in answers] == [400] * len(answers)
    assert httpx.get(f"{gateway.http_url}/healthz").json() == {"ok": True}
    wait_for(lambda: isinstance(gateway.runs(), dict), "the gateway to answer /runs")
