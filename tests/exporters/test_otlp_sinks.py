"""The OTLP sinks hand records and step rows to an OpenTelemetry exporter in the form the gateway reads: each record
span carries its record as JSON (and an eval episode its v0 rows), whatever mix of episodes and bare traces one
batch holds, and the ``run.end`` marker counts what was sent; a metrics row becomes gauge points of its step."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from prime_otel import _conventions as conv
from prime_otel.exporters.otlp import OtlpExportFailed, OtlpMetricsSink, OtlpRecordSink
from prime_otel.records import encode_record
from tests._fixtures import load_episodes, load_records
from tests.exporters._platform_runs import spans

RESOURCE = Resource.create({conv.RUN_ID: "otlp-sink-run", conv.RUN_TYPE: "eval"})


def test_a_mixed_batch_goes_out_as_one_export_each_span_with_its_own_record() -> None:
    exported = InMemorySpanExporter()
    sink = OtlpRecordSink(exported, RESOURCE)
    episodes = load_episodes("eval")
    bare_trace = load_records("eval")[0]["traces"][0]
    batch = [episodes[0], bare_trace, episodes[1]]

    sink.write(spans(batch))

    sent = exported.get_finished_spans()
    assert [span.name for span in sent] == [conv.EPISODE_SPAN, conv.TRACE_SPAN, conv.EPISODE_SPAN]
    assert [json.loads(str(span.attributes[conv.RECORD_JSON])) for span in sent] == [
        json.loads(encode_record(record).plain) for record in batch
    ]
    # An eval run's spans carry only the record: the gateway projects its sample rows from it.
    assert [conv.SAMPLES_JSON in span.attributes for span in sent] == [False, False, False]
    assert all(span.resource is RESOURCE for span in sent)
    assert (sink.stats.delivered, sink.stats.requests) == (3, 1)


def test_a_training_runs_episode_spans_carry_their_rows_with_the_producers_rollout_numbers() -> None:
    exported = InMemorySpanExporter()
    training = Resource.create({conv.RUN_ID: "otlp-sink-train", conv.RUN_TYPE: "train"})
    sink = OtlpRecordSink(exported, training, heartbeat_seconds=0)
    episodes = load_episodes("train")[:2]

    sink.write(spans(episodes))

    sent = exported.get_finished_spans()
    rows = [json.loads(str(span.attributes[conv.SAMPLES_JSON])) for span in sent]
    assert [len(episode_rows) for episode_rows in rows] == [1, 1]
    assert [episode_rows[0]["episode_id"] for episode_rows in rows] == [episode.id for episode in episodes]


def test_the_end_marker_counts_the_episodes_and_traces_sent() -> None:
    exported = InMemorySpanExporter()
    sink = OtlpRecordSink(exported, RESOURCE)
    bare_trace = load_records("eval")[0]["traces"][0]
    sink.write(spans([*load_episodes("eval"), bare_trace]))

    assert sink.send_end_marker(status="completed", error=None, summary={"acc": 1.0}, metric_rows=0, owner=True)

    marker = exported.get_finished_spans()[-1]
    assert marker.name == conv.RUN_END_SPAN
    assert (marker.attributes[conv.END_EPISODES], marker.attributes[conv.END_TRACES]) == (3, 1)
    assert json.loads(str(marker.attributes[conv.END_SUMMARY_JSON])) == {"acc": 1.0}


def test_an_export_the_exporter_refuses_raises_so_the_slot_counts_it() -> None:
    exported = InMemorySpanExporter()
    exported.shutdown()  # a shut-down exporter refuses every export
    sink = OtlpRecordSink(exported, RESOURCE)
    with pytest.raises(OtlpExportFailed):
        sink.write(spans(load_episodes("eval")[:1]))
    assert sink.stats.delivered == 0


class RecordingMetricExporter(MetricExporter):
    """Keeps every export (an OTLP metric exporter's wire is not what is under test here)."""

    def __init__(self) -> None:
        super().__init__()
        self.exports: list[MetricsData] = []

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        self.exports.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        return None


def _points(data: MetricsData) -> list[tuple[str, Any, float]]:
    return [
        (metric.name, point.attributes.get(conv.METRIC_STEP) if point.attributes else None, point.value)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        for point in metric.data.data_points
    ]


def test_a_metrics_row_becomes_gauge_points_of_its_step_in_one_export() -> None:
    exporter = RecordingMetricExporter()
    sink = OtlpMetricsSink(exporter, RESOURCE)
    rows: Sequence[dict[str, Any]] = [
        {"step": 3, "_timestamp": 1.5, "loss": 0.5, "done": True, "note": "text"},
        {"step": 4, "loss": 0.25},
    ]

    sink.write(rows)

    assert len(exporter.exports) == 1
    assert _points(exporter.exports[0]) == [("loss", 3, 0.5), ("loss", 4, 0.25)]
    assert (sink.stats.delivered, sink.stats.requests) == (2, 1)
