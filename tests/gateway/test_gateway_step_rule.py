"""The gateway keeps the in-process step rule: a metric point's ``prime.run.step`` is an integer from 0 to
2**53 - 1. The same points measured in-process and sent to a real gateway (protobuf and OTLP/JSON, where int64
travels as a string) make the same metric rows on the local platform; a point whose step is negative, too large,
a double, a string or a bool becomes no row: the gateway counts it invalid with why (``/runs``, the response's
``partial_success``) while its neighbours land. A rank or world size that is not a
non-negative integer refuses its resource instead of passing for rank 0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
from opentelemetry.sdk.metrics.export import Gauge, Metric, MetricsData, NumberDataPoint, ResourceMetrics, ScopeMetrics
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

import prime_otel as po
from prime_otel import _conventions as conv
from prime_otel.exporters.rft_samples import IMPOSSIBLE_STEP
from prime_otel.testing import LocalPlatform
from tests._platform import point_sdk_at
from tests.gateway._gateway import TEAM, Gateway, create_run
from tests.gateway._producer import end_marker, episode_spans, fresh_episodes, run_resource

PROTOBUF = "application/x-protobuf"
LAST_STEP = 2**53 - 1
#: (metric, step attribute, value): good steps, and steps the in-process collection puts in no row.
GOOD_POINTS: list[tuple[str, Any, int | float]] = [
    ("loss", 0, 0.5),
    ("tokens", 0, 120),
    ("loss", 1, 0.25),
    ("tokens", 1, 80),
    ("loss", LAST_STEP, 0.125),
    ("tokens", LAST_STEP, 0),
]
BAD_POINTS: list[tuple[str, Any, int | float]] = [
    ("loss", -3, 9.0),
    ("loss", 2**53, 9.0),
    ("tokens", 2**60, 9),
    ("loss", 7.0, 9.0),
    ("loss", "7", 9.0),
    ("tokens", True, 9),
]
OUT_OF_RANGE = f"a metric point whose {conv.METRIC_STEP} is an integer outside 0 .. 2**53 - 1"
BAD_REASONS = {
    OUT_OF_RANGE: 3,
    f"a metric point whose {conv.METRIC_STEP} is a double, not an integer from 0 to 2**53 - 1": 1,
    f"a metric point whose {conv.METRIC_STEP} is a string, not an integer from 0 to 2**53 - 1": 1,
    f"a metric point whose {conv.METRIC_STEP} is a bool, not an integer from 0 to 2**53 - 1": 1,
}
_SCOPE = InstrumentationScope("tests.gateway.step_rule")


def rows_of(platform: LocalPlatform, run_id: str) -> list[dict[str, Any]]:
    rows = platform.inspect.run(run_id)["metric_rows"]
    return sorted(({k: v for k, v in row.items() if k != "_timestamp"} for row in rows), key=lambda row: row["step"])


@pytest.fixture(scope="module")
def in_process_rows(platform: LocalPlatform, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The rows an in-process training run's meter makes of the good and the bad points."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        point_sdk_at(platform, monkeypatch, tmp_path_factory.mktemp("in-process"))
        monkeypatch.setenv("PRIME_TEAM_ID", TEAM)
        run = po.init(kind="train", model="m", environments=["gsm8k"], sinks="legacy")
        meter = run.meter()
        assert meter is not None
        gauges = {name: meter.create_gauge(name) for name in ("loss", "tokens")}
        for name, step, value in GOOD_POINTS + BAD_POINTS:
            gauges[name].set(value, {conv.METRIC_STEP: step})
        report = run.finish()
    assert report is not None and report.complete, report.render()
    return rows_of(platform, run.id)


def send_marker(gateway: Gateway, resource: Resource, metric_rows: int) -> None:
    body = encode_spans([end_marker(resource, metric_rows=metric_rows)]).SerializeToString()
    answer = httpx.post(f"{gateway.http_url}/v1/traces", content=body, headers={"Content-Type": PROTOBUF}, timeout=30)
    assert answer.status_code == 200


def metrics_request(resource: Resource, points: list[tuple[str, Any, int | float]]) -> Any:
    """One OTLP export request: a gauge per point, all at one time (a collection), the step as typed."""
    now = 1_700_000_000_000_000_000
    metrics = [
        Metric(
            name=name,
            description=None,
            unit=None,
            data=Gauge([NumberDataPoint({conv.METRIC_STEP: step}, now, now, value)]),
        )
        for name, step, value in points
    ]
    data = MetricsData([ResourceMetrics(resource, [ScopeMetrics(_SCOPE, metrics, "")], "")])
    return encode_metrics(data)


def post_metrics(gateway: Gateway, request: Any, encoding: str) -> ExportMetricsServiceResponse:
    if encoding == "json":
        body = json_format.MessageToJson(request).encode()  # int64 values (the steps) as JSON strings
        assert f'"intValue": "{LAST_STEP}"' in body.decode()
        headers = {"Content-Type": "application/json"}
    else:
        body, headers = request.SerializeToString(), {"Content-Type": PROTOBUF}
    answer = httpx.post(f"{gateway.http_url}/v1/metrics", content=body, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    if encoding == "json":
        return json_format.Parse(answer.content, ExportMetricsServiceResponse())
    return ExportMetricsServiceResponse.FromString(answer.content)


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_the_same_points_make_the_same_rows_and_bad_steps_are_counted_invalid(
    platform: LocalPlatform, gateway: Gateway, in_process_rows: list[dict[str, Any]], encoding: str
) -> None:
    run_id = create_run(platform, "train", f"step-rule-{encoding}")
    resource = run_resource(run_id, "train")
    # The bad points travel between good ones, in the same request.
    mixed = [point for pair in zip(GOOD_POINTS, BAD_POINTS, strict=True) for point in pair]
    answer = post_metrics(gateway, metrics_request(resource, mixed), encoding)

    assert answer.partial_success.rejected_data_points == len(BAD_POINTS)
    assert OUT_OF_RANGE in answer.partial_success.error_message
    held = gateway.runs()[run_id]
    assert held["invalid_reasons"] == BAD_REASONS
    send_marker(gateway, resource, metric_rows=3)

    closed = gateway.wait_closed(run_id)
    # A training run has no summary on the platform: the gateway's status of the closed run is its report.
    assert closed["status"] == "completed" and closed["missing"] == 0 and closed["invalid_reasons"] == BAD_REASONS
    assert in_process_rows == [
        {"loss": 0.5, "tokens": 120, "step": 0},
        {"loss": 0.25, "tokens": 80, "step": 1},
        {"loss": 0.125, "tokens": 0, "step": LAST_STEP},
    ]
    assert rows_of(platform, run_id) == in_process_rows
    assert all(type(row["tokens"]) is int for row in rows_of(platform, run_id))


def test_a_json_step_sent_as_a_number_is_an_integer_too(platform: LocalPlatform, gateway: Gateway) -> None:
    """OTLP/JSON readers take an int64 as a JSON number as well as a string."""
    run_id = create_run(platform, "train", "step-rule-json-number")
    request = metrics_request(run_resource(run_id, "train"), [("loss", 5, 0.5)])
    document = json_format.MessageToDict(request)
    point = document["resourceMetrics"][0]["scopeMetrics"][0]["metrics"][0]["gauge"]["dataPoints"][0]
    point["attributes"][0]["value"] = {"intValue": 5}
    answer = httpx.post(f"{gateway.http_url}/v1/metrics", json=document, timeout=30)
    assert answer.status_code == 200 and "partialSuccess" not in answer.json()
    send_marker(gateway, run_resource(run_id, "train"), metric_rows=1)
    gateway.wait_closed(run_id)
    assert rows_of(platform, run_id) == [{"loss": 0.5, "step": 5}]


@pytest.mark.parametrize(
    ("attribute", "value", "taken"),
    [
        (conv.RUN_RANK, -1, False),
        (conv.RUN_RANK, 1.0, False),
        (conv.RUN_RANK, "one", False),
        (conv.RUN_RANK, True, False),
        (conv.RUN_WORLD_SIZE, -2, False),
        (conv.RUN_RANK, "1", True),  # OTEL_RESOURCE_ATTRIBUTES makes every value a string
    ],
)
def test_a_rank_or_world_size_that_is_no_non_negative_integer_refuses_its_resource(
    platform: LocalPlatform, gateway: Gateway, attribute: str, value: Any, taken: bool
) -> None:
    run_id = create_run(platform, "train", "step-rule-rank")
    resource = Resource({**run_resource(run_id, "train", world_size=2).attributes, attribute: value})
    answer = post_metrics(gateway, metrics_request(resource, [("loss", 3, 0.5)]), "protobuf")
    if taken:
        assert answer.partial_success.rejected_data_points == 0
        assert gateway.runs()[run_id]["received"]["1"]["metric_rows"] == 1
    else:
        assert answer.partial_success.rejected_data_points == 1
        assert f"a {attribute} that is not a non-negative integer" in answer.partial_success.error_message
        assert run_id not in gateway.runs()


def test_a_training_episode_dispatched_at_an_impossible_step_is_counted_failed_on_either_path(
    platform: LocalPlatform, gateway: Gateway, tmp_path: Path
) -> None:
    """A record's dispatch step keeps the same rule: episodes at steps -10 and 2**53 + 8 make no Parquet step object
    and are counted failed by the samples sink, with why, in process as through the gateway, while the episode at
    step 10 makes its step's object on both. (Every step is a multiple of 10, the in-process step interval.)"""
    steps = (10, -10, 2**53 + 8)
    with pytest.MonkeyPatch.context() as monkeypatch:
        point_sdk_at(platform, monkeypatch, tmp_path)
        monkeypatch.setenv("PRIME_TEAM_ID", TEAM)
        run = po.init(kind="train", model="m", environments=["gsm8k"], sinks="legacy")
        run.log_episodes([episode for step in steps for episode in fresh_episodes("train", 1, step=step)])
        report = run.finish()
    assert report is not None
    [samples] = [sink for sink in report.sinks if sink.sink == "rft_samples"]
    assert (samples.delivered, samples.failed, samples.failure_reasons) == (1, 2, {IMPOSSIBLE_STEP: 2})
    in_process = [entry["step"] for entry in platform.inspect.steps(run.id)]

    run_id = create_run(platform, "train", "step-rule-dispatch")
    resource = run_resource(run_id, "train")
    episodes = [episode for step in steps for episode in fresh_episodes("train", 1, step=step)]
    body = encode_spans([*episode_spans(episodes, resource), end_marker(resource, episodes=3)])
    answer = httpx.post(
        f"{gateway.http_url}/v1/traces", content=body.SerializeToString(), headers={"Content-Type": PROTOBUF}
    )
    assert answer.status_code == 200
    closed = gateway.wait_closed(run_id)

    assert in_process == [entry["step"] for entry in platform.inspect.steps(run_id)] == [10]
    assert closed["status"] == "completed"
    assert closed["sinks"]["rft_samples"] == {
        "delivered": 1,
        "failed": 2,
        "skipped": 0,
        "failure_reasons": {IMPOSSIBLE_STEP: 2},
    }
