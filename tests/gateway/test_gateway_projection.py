"""Eval records sent the way ``init(transport="otlp")`` sends them (the producer's own OTLP encoding, the record
once and no rows): the gateway projects each row from the record, the rows in-process export projects, numbering
rollouts per example across the run's ranks; a record it cannot project costs only its row."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource

from prime_otel.exporters.otlp import OtlpRecordSink
from prime_otel.projection import build_samples
from prime_otel.records import RecordSpan
from prime_otel.testing import LocalPlatform
from tests.gateway._gateway import Gateway, create_run
from tests.gateway._producer import end_marker, fresh_episodes, run_resource


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


def test_a_record_that_cannot_be_projected_costs_only_its_row(platform: LocalPlatform, gateway: Gateway) -> None:
    run_id = create_run(platform, "eval", "projection-broken")
    resource = run_resource(run_id, "eval")
    episodes = fresh_episodes("eval", 2)
    shapeless = {"id": "episode-with-a-number-for-a-task", "traces": [{"id": "trace-with-a-number", "task": 5}]}
    spans = [RecordSpan(record, resource, time.time_ns()) for record in (episodes[0], shapeless, episodes[1])]
    _post(gateway, OtlpRecordSink(None, resource).encode_request(spans))  # type: ignore[arg-type]
    _end(gateway, resource, 3)

    status = gateway.wait_closed(run_id)
    assert (status["status"], status["missing"]) == ("completed", 0)
    landed = {row["sample_id"] for row in platform.inspect.samples(run_id)["items"]}
    assert landed == {episode.id for episode in episodes}
    assert status["sinks"]["eval_samples"]["delivered"] == 2
