"""The producer's own OTLP encoding of record spans: a standard ``ExportTraceServiceRequest`` that protobuf reads
as the SDK's encoder would have written it, with the record's JSON once."""

from __future__ import annotations

import json
import time

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource

from prime_otel import _conventions as conv
from prime_otel.exporters.otlp import OtlpRecordSink
from prime_otel.projection import build_samples
from prime_otel.records import RecordSpan
from tests._fixtures import load_episodes

RESOURCE = Resource.create({conv.RUN_ID: "run-wire", conv.RUN_TYPE: "eval", conv.RUN_RANK: 1, "service.name": "x"})


def _spans() -> list[RecordSpan]:
    return [RecordSpan(episode, RESOURCE, time.time_ns()) for episode in load_episodes("eval")]


def test_the_encoded_request_reads_as_the_sdk_encoding_of_the_same_spans() -> None:
    """Resource, scope, ids, times, kind, flags and every attribute are what the SDK's generic encoder writes."""
    spans = _spans()
    ours = ExportTraceServiceRequest.FromString(OtlpRecordSink(None, RESOURCE).encode_request(spans))  # type: ignore[arg-type]
    generic_sink = OtlpRecordSink(None, RESOURCE)  # type: ignore[arg-type]
    theirs = encode_spans([generic_sink._with_record(span) for span in spans])

    (mine,), (reference,) = ours.resource_spans, theirs.resource_spans
    assert mine.resource == reference.resource
    assert mine.scope_spans[0].scope == reference.scope_spans[0].scope
    for got, expected in zip(mine.scope_spans[0].spans, reference.scope_spans[0].spans, strict=True):
        expected.ClearField("status")  # the SDK writes an empty (unset) status; an absent one reads the same
        assert got == expected


def test_an_eval_record_travels_once_and_a_training_one_with_its_rows() -> None:
    """An eval span holds the record's JSON and nothing derived from it (the gateway projects the rows); a
    training span also holds its rows, numbered by this process."""
    spans = _spans()
    request = ExportTraceServiceRequest.FromString(OtlpRecordSink(None, RESOURCE).encode_request(spans))  # type: ignore[arg-type]
    for span, sent in zip(spans, request.resource_spans[0].scope_spans[0].spans, strict=True):
        attributes = {pair.key: pair.value for pair in sent.attributes}
        assert attributes[conv.RECORD_JSON].string_value.encode() == span.encoded().plain
        assert conv.SAMPLES_JSON not in attributes

    train = Resource.create({conv.RUN_ID: "run-wire", conv.RUN_TYPE: "train"})
    request = ExportTraceServiceRequest.FromString(OtlpRecordSink(None, train).encode_request(spans))  # type: ignore[arg-type]
    expected = build_samples([span.record for span in spans])
    for sent, row in zip(request.resource_spans[0].scope_spans[0].spans, expected, strict=True):
        attributes = {pair.key: pair.value for pair in sent.attributes}
        assert json.loads(attributes[conv.SAMPLES_JSON].string_value) == [row]
