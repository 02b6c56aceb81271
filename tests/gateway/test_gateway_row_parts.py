"""Records sent the way ``init(transport="otlp")`` sends them (the producer's own OTLP encoding: the record once,
its sample row as parts around it): the gateway joins each row around the record's bytes, numbering rollouts per
example across the run's ranks; a row whose parts are broken is projected at the gateway from its record."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource

from prime_otel import _conventions as conv
from prime_otel.exporters.otlp import OtlpRecordSink
from prime_otel.projection import build_samples
from prime_otel.records import RecordSpan
from prime_otel.testing import LocalPlatform
from tests.gateway._gateway import Gateway
from tests.gateway._producer import end_marker, fresh_episodes, run_resource
from tests.gateway.conftest import create_run


def _request(resource: Resource, episodes: list[Any]) -> bytes:
    sink = OtlpRecordSink(None, resource)  # type: ignore[arg-type]
    return sink.encode_request([RecordSpan(episode, resource, time.time_ns()) for episode in episodes])


def _post(gateway: Gateway, body: bytes) -> None:
    answer = httpx.post(
        f"{gateway.http_url}/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"}, timeout=30
    )
    answer.raise_for_status()


def _end(gateway: Gateway, resource: Resource, episodes: int, *, owner: bool = True) -> None:
    _post(gateway, encode_spans([end_marker(resource, episodes=episodes, owner=owner)]).SerializeToString())


def _without_numbers(row: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in row.items() if key != "rollout_number"}


def test_rows_from_two_ranks_land_as_projected_numbered_per_example_across_the_run(
    platform: LocalPlatform, gateway: Gateway
) -> None:
    run_id = create_run(platform, "eval", "row-parts-two-ranks")
    owner, joined = (run_resource(run_id, "eval", rank=rank, world_size=2) for rank in (0, 1))
    owner_episodes, joined_episodes = fresh_episodes("eval", 4), fresh_episodes("eval", 3)
    _post(gateway, _request(owner, owner_episodes))
    _post(gateway, _request(joined, joined_episodes))
    _end(gateway, owner, 4)
    _end(gateway, joined, 3, owner=False)

    status = gateway.wait_closed(run_id)
    assert (status["status"], status["missing"], status["invalid"]) == ("completed", 0, 0)
    rows = platform.inspect.samples(run_id)["items"]
    expected = build_samples(owner_episodes + joined_episodes)
    by_id = {row["sample_id"]: row for row in rows}
    assert sorted(by_id) == sorted(row["sample_id"] for row in expected)
    for row in expected:
        assert _without_numbers(by_id[row["sample_id"]]) == _without_numbers(row)
    per_example = Counter(row["example_id"] for row in rows)
    numbers = {(row["example_id"], row["rollout_number"]) for row in rows}
    assert numbers == {(example, n) for example, count in per_example.items() for n in range(1, count + 1)}
    assert len(platform.inspect.episodes(run_id)["items"]) == 7


def test_a_row_whose_parts_do_not_start_a_row_is_projected_from_its_record(
    platform: LocalPlatform, gateway: Gateway
) -> None:
    """The row lands as the projection of the record that came with it; its neighbours land as sent."""
    run_id = create_run(platform, "eval", "row-parts-broken")
    resource = run_resource(run_id, "eval")
    episodes = fresh_episodes("eval", 3)
    request = ExportTraceServiceRequest.FromString(_request(resource, episodes))
    broken = request.resource_spans[0].scope_spans[0].spans[1]
    parts = next(pair for pair in broken.attributes if pair.key == conv.SAMPLE_PARTS)
    parts.value.array_value.values[0].string_value = "not the start of a row"
    _post(gateway, request.SerializeToString())
    _end(gateway, resource, 3)

    status = gateway.wait_closed(run_id)
    assert (status["status"], status["missing"]) == ("completed", 0)
    landed = {row["sample_id"]: row for row in platform.inspect.samples(run_id)["items"]}
    expected = {row["sample_id"]: _without_numbers(row) for row in build_samples(episodes)}
    assert {sample_id: _without_numbers(row) for sample_id, row in landed.items()} == expected
    assert {episode["id"] for episode in platform.inspect.episodes(run_id)["items"]} == {e.id for e in episodes}
