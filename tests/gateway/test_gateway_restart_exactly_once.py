"""A gateway SIGKILLed while a non-idempotent request was already applied by the platform but not yet answered, and
started again on the same state folder, stores every record once: the eval sample table (append-only) gets each
episode's rows once, numbered as a run without the kill numbers them, and the training step objects (additive per
step) hold each episode's rows once, with sample ids unique per step. Per-sink counts in ``/runs`` are the run's
totals across the restart. The kill comes once the platform's request log shows the request applied and its
answer held (the ``hold_after`` fault), so the timing is the platform's, not a sleep's."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext

from prime_otel import _conventions as conv
from prime_otel.exporters.otlp import OtlpRecordSink
from prime_otel.gateway._state import GatewayState
from prime_otel.projection import build_samples
from prime_otel.records import RecordSpan
from prime_otel.testing import LocalPlatform
from tests._waiting import wait_for
from tests.gateway._gateway import create_run
from tests.gateway._producer import end_marker, episode_spans, fresh_episodes, record_span, run_resource
from tests.gateway._restart import AUTH, HOLD_SECONDS, answered, end, held, kill, post, send, start
from tests.genai._spans import chat, reward, text

pytestmark = [pytest.mark.slow]


def episode_of(row: dict[str, Any]) -> Any:
    """The episode a Parquet row was built from (its record rides in the row's ``info``)."""
    info = row["info"] if isinstance(row["info"], dict) else json.loads(row["info"])
    return info["native_wrapper"]["id"]


def overridden(span: ReadableSpan, attributes: dict[str, Any]) -> ReadableSpan:
    """A copy of ``span`` (a fresh span id) with ``attributes`` set over its own."""
    return ReadableSpan(
        name=span.name,
        context=SpanContext(span.context.trace_id, span.context.span_id ^ 1, False),
        resource=span.resource,
        attributes={**(span.attributes or {}), **attributes},
        start_time=span.start_time,
        end_time=span.end_time,
    )


def test_an_eval_gateway_killed_while_its_applied_samples_post_awaits_its_answer_stores_each_row_once(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    run_id = create_run(platform, "eval", "restart-held-samples")
    resource = run_resource(run_id, "eval")
    before, in_flight, after = (fresh_episodes("eval", 3) for _ in range(3))
    state = tmp_path / "state"
    first = start(platform, tmp_path / "first", state)
    try:
        send(first, resource, before)
        wait_for(lambda: answered(platform, run_id, "/samples", 1), "the first batch's rows to be stored")
        platform.inspect.add_fault(
            method="POST", path=f"/api/v1/evaluations/{run_id}/samples", action="hold_after", delay_s=HOLD_SECONDS
        )
        send(first, resource, in_flight)
        wait_for(lambda: held(platform, run_id, "/samples"), "the second batch's rows to be applied, unanswered")
        kill(first)
    finally:
        first.stop()
    with start(platform, tmp_path / "again", state) as again:
        send(again, resource, after)
        end(again, resource, 9)
        closed = again.wait_closed(run_id)
    assert (closed["status"], closed["missing"]) == ("completed", 0)
    rows = platform.inspect.samples(run_id)["items"]
    logged = before + in_flight + after
    assert Counter(row["sample_id"] for row in rows) == Counter(episode.id for episode in logged)  # each once
    # Numbered as a gateway that was never killed numbers them: per example, in the order the records came.
    expected = {(row["sample_id"], row["rollout_number"]) for row in build_samples(logged)}
    assert {(row["sample_id"], row["rollout_number"]) for row in rows} == expected
    sinks = closed["sinks"]
    assert (sinks["eval_samples"]["delivered"], sinks["eval_samples"]["failed"]) == (9, 0)
    assert (sinks["traces"]["delivered"], sinks["traces"]["failed"]) == (9, 0)
    assert sorted(e["id"] for e in platform.inspect.episodes(run_id)["items"]) == sorted(e.id for e in logged)
    # The summary the run was closed with counts every episode Prime Traces wrote, before and after the kill.
    assert platform.inspect.run(run_id)["summary"]["prime_runs"]["traces_episodes_written"] == 9


def test_a_training_gateway_killed_while_its_applied_step_confirm_awaits_its_answer_stores_each_row_once(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    run_id = create_run(platform, "train", "restart-held-confirm")
    resource = run_resource(run_id, "train")
    before, in_flight, after = fresh_episodes("train", 3, step=4), *(fresh_episodes("train", 3, step=5) for _ in "ab")
    state = tmp_path / "state"
    first = start(platform, tmp_path / "first", state)
    try:
        send(first, resource, before)
        wait_for(lambda: answered(platform, run_id, "/samples/confirm", 1), "step 4's object to be confirmed")
        platform.inspect.add_fault(
            method="POST", path="/api/v1/rft/samples/confirm", action="hold_after", delay_s=HOLD_SECONDS
        )
        send(first, resource, in_flight)
        wait_for(lambda: held(platform, run_id, "/samples/confirm"), "step 5's confirm to be applied, unanswered")
        kill(first)
    finally:
        first.stop()
    with start(platform, tmp_path / "again", state) as again:
        send(again, resource, after)  # more episodes of step 5: a second object of that step
        end(again, resource, 9)
        closed = again.wait_closed(run_id)
    assert (closed["status"], closed["missing"]) == ("completed", 0)
    for step, episodes in ((4, before), (5, in_flight + after)):
        rows = platform.inspect.step_rows(run_id, step)["items"]
        assert Counter(episode_of(row) for row in rows) == Counter(episode.id for episode in episodes)
        assert len({row["sample_id"] for row in rows}) == len(rows)  # unique per step
    sinks = closed["sinks"]
    assert (sinks["rft_samples"]["delivered"], sinks["rft_samples"]["failed"]) == (9, 0)
    assert (sinks["traces"]["delivered"], sinks["traces"]["failed"]) == (9, 0)


def test_when_no_read_can_tell_whether_the_applied_post_stored_its_rows_they_are_counted_possibly_missing(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    """The restarted gateway cannot read the sample table back: the records whose request was in flight are
    counted failed with why, and never sent again (the table already holds them once)."""
    run_id = create_run(platform, "eval", "restart-unreadable-table")
    resource = run_resource(run_id, "eval")
    in_flight, after = fresh_episodes("eval", 3), fresh_episodes("eval", 2)
    state = tmp_path / "state"
    samples = f"/api/v1/evaluations/{run_id}/samples"
    first = start(platform, tmp_path / "first", state)
    try:
        platform.inspect.add_fault(method="POST", path=samples, action="hold_after", delay_s=HOLD_SECONDS)
        send(first, resource, in_flight)
        wait_for(lambda: held(platform, run_id, "/samples"), "the rows to be applied, unanswered")
        kill(first)
        platform.inspect.add_fault(method="GET", path=samples, action="fail_before", status=503, times=None)
        with start(platform, tmp_path / "again", state) as again:
            send(again, resource, after)
            end(again, resource, 5)
            closed = again.wait_closed(run_id)
    finally:
        first.stop()
        platform.inspect.clear_faults()
    assert (closed["status"], closed["missing"]) == ("completed", 0)
    rows = platform.inspect.samples(run_id)["items"]
    assert Counter(row["sample_id"] for row in rows) == Counter(e.id for e in in_flight + after)  # none twice
    eval_samples = closed["sinks"]["eval_samples"]
    assert (eval_samples["delivered"], eval_samples["failed"]) == (2, 3)
    assert eval_samples["failure_reasons"] == {"possibly stored before a gateway restart (not sent again)": 3}


def test_failures_duplicates_and_invalid_records_counted_before_a_restart_are_still_counted_after_it(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    run_id = create_run(platform, "eval", "restart-counted-failure")
    resource = run_resource(run_id, "eval")
    refused, kept, after = fresh_episodes("eval", 1), fresh_episodes("eval", 2), fresh_episodes("eval", 2)
    not_an_object = overridden(record_span(resource, {"id": "x"}), {conv.RECORD_JSON: "[1, 2]"})
    uncountable_end = overridden(end_marker(resource), {conv.END_EPISODES: "many"})
    state = tmp_path / "state"
    first = start(platform, tmp_path / "first", state)
    try:
        platform.inspect.add_fault(
            method="POST", path=f"/api/v1/evaluations/{run_id}/samples", action="fail_before", status=422
        )
        send(first, resource, refused)
        # Answered before any route ran, the refusal is logged under its path only (not under the run).
        samples = f"/api/v1/evaluations/{run_id}/samples"
        wait_for(
            lambda: any(r["path"] == samples and r["status"] == 422 for r in platform.inspect.requests(limit=500)),
            "the first batch's rows to be refused",
        )
        spans = [RecordSpan(episode, resource, time.time_ns()) for episode in kept]
        body = OtlpRecordSink(None, resource).encode_request(spans)  # type: ignore[arg-type]
        post(first, body)
        post(first, body)  # the exporter's retry: two duplicates
        post(first, encode_spans([not_an_object, uncountable_end]).SerializeToString())
        # The second batch's rows stored means the first batch's delivery (and its counts) was settled.
        wait_for(lambda: answered(platform, run_id, "/samples", 1), "the second batch's rows to be stored")
        kill(first)
    finally:
        first.stop()
    with start(platform, tmp_path / "again", state) as again:
        send(again, resource, after)
        end(again, resource, 6)
        closed = again.wait_closed(run_id)
    assert (closed["status"], closed["missing"]) == ("completed", 0)
    eval_samples = closed["sinks"]["eval_samples"]
    assert (eval_samples["delivered"], eval_samples["failed"]) == (4, 1)
    assert eval_samples["failure_reasons"] == {"rejected by the platform: 422": 1}
    assert (closed["sinks"]["traces"]["delivered"], closed["sinks"]["traces"]["failed"]) == (5, 0)
    assert closed["duplicates"] == 2
    invalid = {
        "a run.end record count that is not a non-negative integer": 1,
        "episode record that is not a JSON object": 1,
    }
    assert closed["invalid_reasons"] == invalid
    assert platform.inspect.run(run_id)["summary"]["prime_runs"]["invalid_records"] == invalid
    landed = Counter(row["sample_id"] for row in platform.inspect.samples(run_id)["items"])
    assert landed == Counter(e.id for e in kept + after)


def test_rows_the_platform_stores_only_after_the_gateway_died_are_not_sent_again(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    """The platform took the samples POST and applies it only after the gateway was killed (no answer ever left):
    the restarted gateway reads the rows back, finds them stored, and does not send them again."""
    run_id = create_run(platform, "eval", "restart-late-apply")
    resource = run_resource(run_id, "eval")
    in_flight = fresh_episodes("eval", 3)
    state = tmp_path / "state"
    first = start(platform, tmp_path / "first", state)
    try:
        platform.inspect.add_fault(
            method="POST", path=f"/api/v1/evaluations/{run_id}/samples", action="delay", delay_s=3.0
        )
        send(first, resource, in_flight)
        wait_for(lambda: all(rule["remaining"] == 0 for rule in platform.inspect.faults()), "the POST to arrive")
        kill(first)
        assert platform.inspect.samples(run_id)["total"] == 0  # not applied yet
    finally:
        first.stop()
    with start(platform, tmp_path / "again", state) as again:
        end(again, resource, 3)
        closed = again.wait_closed(run_id)
    platform.inspect.clear_faults()
    assert (closed["status"], closed["missing"]) == ("completed", 0)
    rows = platform.inspect.samples(run_id)["items"]
    assert Counter(row["sample_id"] for row in rows) == Counter(e.id for e in in_flight)
    assert (closed["sinks"]["eval_samples"]["delivered"], closed["sinks"]["eval_samples"]["failed"]) == (3, 0)


def test_an_episode_assembled_from_genai_spans_before_a_restart_still_counts_as_arrived(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    """The gateway assembled an episode from standard GenAI spans, then was killed: started again, it delivers the
    assembled record once and counts it toward the end marker, so the run completes with nothing missing."""
    run_id = create_run(platform, "eval", "restart-assembled-genai")
    resource = run_resource(run_id, "eval")
    provider = TracerProvider(resource=resource)
    spans = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("tests.gateway")
    with tracer.start_as_current_span("episode", attributes={"prime.task.idx": 4, "prime.task.answer": "5"}) as span:
        chat(tracer, [text("user", "Add 2 and 3.")], text("assistant", "5."), usage=(20, 3))
        reward(span, "correct", 1.0)
    provider.shutdown()
    state = tmp_path / "state"
    first = start(platform, tmp_path / "first", state)
    try:
        exporter = HttpSpanExporter(endpoint=f"{first.http_url}/v1/traces", headers=AUTH)
        assert exporter.export(list(spans.get_finished_spans())) is SpanExportResult.SUCCESS
        wait_for(
            lambda: first.runs()[run_id]["received"].get("0", {}).get("episodes") == 1, "the episode to be assembled"
        )
        kill(first)
    finally:
        first.stop()
    with start(platform, tmp_path / "again", state) as again:
        end(again, resource, 1)
        closed = again.wait_closed(run_id)
    assert (closed["status"], closed["missing"]) == ("completed", 0)
    assert len(platform.inspect.episodes(run_id)["items"]) == 1
    assert platform.inspect.samples(run_id)["total"] == 1


def test_a_record_logged_but_never_acknowledged_before_the_kill_is_stored_once_from_the_senders_retry(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    """The gateway died between logging a record to the run's spool and storing its span id (left on disk here as
    that instant leaves it): its sender got no answer and sends the record again. The restarted gateway takes the
    retry and does not replay the logged copy, so the sample table holds its rows once."""
    run_id = create_run(platform, "eval", "restart-unacknowledged-record")
    resource = run_resource(run_id, "eval")
    acknowledged, unanswered = fresh_episodes("eval", 2), fresh_episodes("eval", 1)
    state = tmp_path / "state"
    first = start(platform, tmp_path / "first", state)
    try:
        send(first, resource, acknowledged)
        wait_for(lambda: answered(platform, run_id, "/samples", 1), "the acknowledged rows to be stored")
        kill(first)
    finally:
        first.stop()
    [retry] = episode_spans(unanswered, resource)
    attributes = dict(retry.attributes or {})
    span_id = retry.context.trace_id.to_bytes(16, "big") + retry.context.span_id.to_bytes(8, "big")
    logged = {
        "record": attributes[conv.RECORD_JSON],
        "samples": attributes[conv.SAMPLES_JSON],
        "end": retry.end_time,
        "id": span_id.hex(),
    }
    assert GatewayState(state).spool(run_id).append(conv.EPISODE_SPAN, [json.dumps(logged).encode()]) is not None
    with start(platform, tmp_path / "again", state) as again:
        post(again, encode_spans([retry]).SerializeToString())
        end(again, resource, 3)
        closed = again.wait_closed(run_id)
    assert (closed["status"], closed["missing"]) == ("completed", 0)
    rows = platform.inspect.samples(run_id)["items"]
    assert Counter(row["sample_id"] for row in rows) == Counter(e.id for e in acknowledged + unanswered)
