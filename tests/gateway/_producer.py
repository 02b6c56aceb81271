"""A minimal OTLP producer following the wire conventions (``prime_otel._conventions``), built from the fixtures
with the OpenTelemetry SDK's own span type and OTLP exporters, the way any producer process would send."""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.metrics.export import (
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import RandomIdGenerator, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from prime_otel import _conventions as conv
from prime_otel.projection import encode_samples
from prime_otel.records import EncodedRecord, to_mapping
from tests._fixtures import episode_from_record, load_records

_SCOPE = InstrumentationScope("tests.gateway")
_ids = RandomIdGenerator()


def run_resource(run_id: str, kind: str, *, rank: int = 0, world_size: int = 1) -> Resource:
    return Resource.create(
        {
            conv.RUN_ID: run_id,
            conv.RUN_TYPE: kind,
            conv.RUN_NAME: f"gateway-test-{run_id}",
            conv.RUN_RANK: rank,
            conv.RUN_WORLD_SIZE: world_size,
            "service.name": f"prime-{kind}",
        }
    )


def fresh_episodes(kind: str, count: int, *, step: int | None = None) -> list[Any]:
    """Real verifiers episodes from the fixture records, under fresh ids (``step``: the dispatch step)."""
    records = load_records(kind)  # type: ignore[arg-type]
    episodes = []
    for number in range(count):
        record = copy.deepcopy(records[number % len(records)])
        record["id"] = uuid.uuid4().hex
        for trace in record["traces"]:
            trace["id"] = uuid.uuid4().hex
        if step is not None:
            record["run"]["work"]["step"] = step
        episodes.append(episode_from_record(record))
    return episodes


def _span(name: str, resource: Resource, attributes: Mapping[str, Any]) -> ReadableSpan:
    now = time.time_ns()
    return ReadableSpan(
        name=name,
        context=SpanContext(_ids.generate_trace_id(), _ids.generate_span_id(), False, TraceFlags(TraceFlags.SAMPLED)),
        resource=resource,
        attributes=dict(attributes),
        kind=SpanKind.INTERNAL,
        start_time=now,
        end_time=now,
        instrumentation_scope=_SCOPE,
    )


def episode_spans(
    episodes: Sequence[Any], resource: Resource, rollout_numbers: dict[Any, int] | None = None
) -> list[ReadableSpan]:
    """One ``episode`` span per episode: the unstamped record and its v0 rows as JSON strings."""
    numbers: dict[Any, int] = {} if rollout_numbers is None else rollout_numbers
    spans = []
    for episode in episodes:
        encoded = EncodedRecord(to_mapping(episode))
        rows = encode_samples([episode], numbers, records=[encoded])
        attributes: dict[str, Any] = {
            conv.RECORD_JSON: encoded.plain.decode("utf-8"),
            conv.EPISODE_ID: episode.id,
        }
        if rows:
            attributes[conv.SAMPLES_JSON] = "[" + ",".join(row.data.decode("utf-8") for row in rows) + "]"
        step = encoded.record.get("run", {}).get("work", {}).get("step")
        if isinstance(step, int):
            attributes[conv.RUN_STEP] = step
        spans.append(_span(conv.EPISODE_SPAN, resource, attributes))
    return spans


def record_span(resource: Resource, record: Mapping[str, Any], name: str = conv.EPISODE_SPAN) -> ReadableSpan:
    """A record span carrying only the record (a JSON-only record: no sample rows)."""
    return _span(name, resource, {conv.RECORD_JSON: json.dumps(dict(record))})


def end_marker(
    resource: Resource,
    *,
    status: str = "completed",
    episodes: int = 0,
    traces: int = 0,
    metric_rows: int = 0,
    owner: bool = True,
    summary: Mapping[str, Any] | None = None,
    error: str | None = None,
) -> ReadableSpan:
    attributes: dict[str, Any] = {
        conv.END_STATUS: status,
        conv.END_EPISODES: episodes,
        conv.END_TRACES: traces,
        conv.END_METRIC_ROWS: metric_rows,
        conv.END_OWNER: owner,
        conv.END_SUMMARY_JSON: json.dumps(dict(summary or {})),
    }
    if error:
        attributes[conv.END_ERROR] = error
    return _span(conv.RUN_END_SPAN, resource, attributes)


def step_metrics(resource: Resource, step: int, values: Mapping[str, float]) -> MetricsData:
    """One step row as gauge points carrying ``prime.run.step``, one metric per key."""
    now = time.time_ns()
    metrics = [
        Metric(
            name=name,
            description=None,
            unit=None,
            data=Gauge(
                data_points=[
                    NumberDataPoint(
                        attributes={conv.METRIC_STEP: step}, start_time_unix_nano=now, time_unix_nano=now, value=value
                    )
                ]
            ),
        )
        for name, value in values.items()
    ]
    return MetricsData(resource_metrics=[ResourceMetrics(resource, [ScopeMetrics(_SCOPE, metrics, "")], "")])
