"""The gateway end to end: OTLP from the OpenTelemetry SDK's own exporters (HTTP and gRPC) into a gateway
subprocess, out to a local platform; runs closed by their end markers or their lease."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.metrics.export import MetricExportResult
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from prime_otel.testing import LocalPlatform
from tests.gateway._gateway import LEASE_SECONDS, Gateway, create_run
from tests.gateway._producer import end_marker, episode_spans, fresh_episodes, run_resource, step_metrics


@pytest.fixture
def http_exporter(gateway: Gateway) -> Iterator[SpanExporter]:
    exporter = HttpSpanExporter(endpoint=f"{gateway.http_url}/v1/traces", compression=Compression.Gzip)
    yield exporter
    exporter.shutdown()


@pytest.fixture
def grpc_exporter(gateway: Gateway) -> Iterator[SpanExporter]:
    exporter = GrpcSpanExporter(endpoint=gateway.grpc_endpoint, insecure=True)
    yield exporter
    exporter.shutdown()


def send(exporter: SpanExporter, spans: list[ReadableSpan]) -> None:
    assert exporter.export(spans) is SpanExportResult.SUCCESS


def landed_samples(platform: LocalPlatform, run_id: str) -> list[dict[str, Any]]:
    return list(platform.inspect.samples(run_id)["items"])


def landed_episode_ids(platform: LocalPlatform, run_id: str) -> list[str]:
    return [episode["id"] for episode in platform.inspect.episodes(run_id)["items"]]


def test_an_eval_run_lands_once_and_is_finalized_with_the_markers_status(
    platform: LocalPlatform, gateway: Gateway, http_exporter: SpanExporter
) -> None:
    """Samples and Prime Traces episodes land once; the summary carries traces_episodes_written."""
    run_id = create_run(platform, "eval", "otlp-eval")
    resource = run_resource(run_id, "eval")
    episodes = fresh_episodes("eval", 3)
    send(http_exporter, episode_spans(episodes, resource))
    send(http_exporter, [end_marker(resource, episodes=3, summary={"avg_reward": 0.5})])

    status = gateway.wait_closed(run_id)
    assert (status["status"], status["missing"], status["dropped"], status["invalid"]) == ("completed", 0, 0, 0)
    snapshot = platform.inspect.run(run_id)
    assert snapshot["status"] in ("PROCESSING", "COMPLETED")
    assert snapshot["summary"]["avg_reward"] == 0.5
    assert snapshot["summary"]["prime_runs"]["traces_episodes_written"] == 3
    expected = sorted(episode.id for episode in episodes)
    assert sorted(row["sample_id"] for row in landed_samples(platform, run_id)) == expected
    assert sorted(landed_episode_ids(platform, run_id)) == expected
    stamped = platform.inspect.episodes(run_id)["items"][0]
    assert (stamped["run"]["id"], stamped["run"]["type"]) == (run_id, "eval")

    # Data for a closed run is refused per record (OTLP partial success), not silently taken.
    late = encode_spans(episode_spans(fresh_episodes("eval", 1), resource)).SerializeToString()
    answer = httpx.post(
        f"{gateway.http_url}/v1/traces", content=late, headers={"Content-Type": "application/x-protobuf"}
    )
    assert answer.status_code == 200
    assert ExportTraceServiceResponse.FromString(answer.content).partial_success.rejected_spans == 1
    assert len(landed_samples(platform, run_id)) == 3


def test_a_replayed_export_stores_nothing_twice(
    platform: LocalPlatform, gateway: Gateway, http_exporter: SpanExporter, grpc_exporter: SpanExporter
) -> None:
    """OTLP exporters replay ambiguous failures: the gateway dedupes by span id (over either protocol)."""
    run_id = create_run(platform, "eval", "otlp-replay")
    resource = run_resource(run_id, "eval")
    spans = episode_spans(fresh_episodes("eval", 3), resource)
    send(http_exporter, spans)
    send(grpc_exporter, spans)
    marker = end_marker(resource, episodes=3)
    send(http_exporter, [marker])
    send(http_exporter, [marker])

    status = gateway.wait_closed(run_id)
    # The replayed marker is a duplicate, or refused once the run closed.
    assert status["duplicates"] + status["rejected"] == 4 and status["received"]["0"]["episodes"] == 3
    assert len(landed_samples(platform, run_id)) == 3
    assert len(landed_episode_ids(platform, run_id)) == 3


def test_two_ranks_share_a_run_and_only_the_owners_marker_sets_the_status(
    platform: LocalPlatform, gateway: Gateway, grpc_exporter: SpanExporter
) -> None:
    """Rank 1 joined the run (not its owner): its failed marker does not fail the run; rollouts are numbered per
    example across both ranks."""
    run_id = create_run(platform, "eval", "otlp-two-ranks")
    owner = run_resource(run_id, "eval", rank=0, world_size=2)
    joined = run_resource(run_id, "eval", rank=1, world_size=2)
    owner_episodes = fresh_episodes("eval", 3)
    joined_episodes = fresh_episodes("eval", 2)
    send(grpc_exporter, episode_spans(owner_episodes, owner))
    send(grpc_exporter, [end_marker(owner, episodes=3, summary={"avg_reward": 1.0})])
    assert gateway.runs()[run_id]["state"] == "open"  # rank 1 has not ended yet
    send(grpc_exporter, episode_spans(joined_episodes, joined))
    send(grpc_exporter, [end_marker(joined, status="failed", episodes=2, owner=False, error="rank 1 broke")])

    status = gateway.wait_closed(run_id)
    assert status["status"] == "completed"
    assert platform.inspect.run(run_id)["status"] in ("PROCESSING", "COMPLETED")
    rows = landed_samples(platform, run_id)
    assert sorted(row["sample_id"] for row in rows) == sorted(e.id for e in owner_episodes + joined_episodes)
    per_example = Counter(row["example_id"] for row in rows)
    numbers = {(row["example_id"], row["rollout_number"]) for row in rows}
    assert numbers == {(example, n) for example, count in per_example.items() for n in range(1, count + 1)}


def test_a_run_silent_past_its_lease_is_closed_as_crashed(
    platform: LocalPlatform, gateway: Gateway, http_exporter: SpanExporter
) -> None:
    """A producer killed before its marker: what arrived is delivered, the run ends FAILED with a crash message."""
    run_id = create_run(platform, "eval", "otlp-crash")
    resource = run_resource(run_id, "eval")
    send(http_exporter, episode_spans(fresh_episodes("eval", 2), resource))

    status = gateway.wait_closed(run_id, timeout=LEASE_SECONDS + 30)
    assert status["status"] == "crashed"
    snapshot = platform.inspect.run(run_id)
    assert snapshot["status"] == "FAILED"
    assert snapshot["error_message"] == f"crashed: no data from the producer for {LEASE_SECONDS} s"
    assert len(landed_samples(platform, run_id)) == 2


def test_a_training_run_gets_its_parquet_step_merged_metric_rows_and_completes(
    platform: LocalPlatform, gateway: Gateway, http_exporter: SpanExporter
) -> None:
    """On the OTLP path: one metrics row per step (keys merged across requests), Parquet rows built
    from the producers' v0 rows."""
    run_id = create_run(platform, "train", "otlp-train")
    resource = run_resource(run_id, "train")
    episodes = fresh_episodes("train", 3, step=10)
    send(http_exporter, episode_spans(episodes, resource))
    metrics = OTLPMetricExporter(endpoint=f"{gateway.http_url}/v1/metrics")
    try:
        for step, values in ((10, {"loss": 0.5}), (10, {"reward": 0.7}), (11, {"loss": 0.25})):
            assert metrics.export(step_metrics(resource, step, values)) is MetricExportResult.SUCCESS
    finally:
        metrics.shutdown()
    send(http_exporter, [end_marker(resource, episodes=3, metric_rows=3)])

    status = gateway.wait_closed(run_id)
    assert status["status"] == "completed"
    snapshot = platform.inspect.run(run_id)
    assert snapshot["status"] == "COMPLETED"
    rows = {row["step"]: row for row in snapshot["metric_rows"]}
    assert sorted(rows) == [10, 11]
    assert (rows[10]["loss"], rows[10]["reward"], rows[11]["loss"]) == (0.5, 0.7, 0.25)
    assert [entry["step"] for entry in platform.inspect.steps(run_id)] == [10]
    parquet_rows = platform.inspect.step_rows(run_id, 10)["items"]
    assert sorted(json.loads(row["info"])["native_wrapper"]["id"] for row in parquet_rows) == sorted(
        episode.id for episode in episodes
    )
    assert {row["env_name"] for row in parquet_rows} == {"gsm8k"}
    assert sorted(landed_episode_ids(platform, run_id)) == sorted(episode.id for episode in episodes)


def test_json_records_as_map_attributes_without_sample_rows_are_projected_at_the_gateway(
    platform: LocalPlatform, gateway: Gateway, http_exporter: SpanExporter
) -> None:
    """A plain-API producer sends only the record (as a ``prime.record`` map): the sample table still gets rows."""
    run_id = create_run(platform, "eval", "otlp-plain-records")
    resource = run_resource(run_id, "eval")
    episodes = fresh_episodes("eval", 3)
    spans = [
        ReadableSpan(name="episode", context=span.context, resource=resource, attributes={"prime.record": record})
        for span, record in zip(episode_spans(episodes, resource), (e.to_record() for e in episodes), strict=True)
    ]
    send(http_exporter, spans)
    send(http_exporter, [end_marker(resource, episodes=3)])

    assert gateway.wait_closed(run_id)["status"] == "completed"
    expected = sorted(episode.id for episode in episodes)
    assert sorted(row["sample_id"] for row in landed_samples(platform, run_id)) == expected
    assert sorted(landed_episode_ids(platform, run_id)) == expected
