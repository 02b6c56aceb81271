"""What a gateway counted or merged before a SIGKILL still holds after it is started again on the same state
folder: the data it refused for a run already closing stays counted as rejected, and a training step whose keys
came in several requests, some before the kill and some after, ends as one platform row with every key at its
latest value (the platform merges a step's rows, later values winning per key, so the restarted gateway need not
remember the keys it merged before)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics.export import MetricExportResult

from prime_otel.testing import LocalPlatform
from tests._waiting import wait_for
from tests.gateway._gateway import create_run
from tests.gateway._producer import end_marker, fresh_episodes, run_resource, step_metrics
from tests.gateway._restart import AUTH, HOLD_SECONDS, end, held, kill, post, send, start

pytestmark = [pytest.mark.slow]


def test_data_refused_for_a_closing_run_is_still_counted_rejected_after_a_restart(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    """The run's close is under way (its summary update applied by the platform, the answer held back) when more
    records come: refused and counted rejected. The gateway is killed and started again: it closes the run again,
    and still counts them."""
    run_id = create_run(platform, "eval", "restart-rejected")
    resource = run_resource(run_id, "eval")
    state = tmp_path / "state"
    update = f"/api/v1/evaluations/{run_id}"
    first = start(platform, tmp_path / "first", state)
    try:
        platform.inspect.add_fault(method="PUT", path=update, action="hold_after", delay_s=HOLD_SECONDS)
        early = fresh_episodes("eval", 2)
        send(first, resource, early)
        end(first, resource, 2)
        wait_for(lambda: held(platform, run_id, update), "the close's summary update to be applied, unanswered")
        assert first.runs()[run_id]["state"] == "closing"
        late = fresh_episodes("eval", 3)
        send(first, resource, late)  # answered with the three refused in partial_success
        assert first.runs()[run_id]["rejected"] == 3
        kill(first)
    finally:
        first.stop()
        platform.inspect.clear_faults()
    with start(platform, tmp_path / "again", state) as again:
        closed = again.wait_closed(run_id)
    assert (closed["status"], closed["missing"]) == ("completed", 0)
    assert closed["rejected"] == 3
    landed = sorted(e["id"] for e in platform.inspect.episodes(run_id)["items"])
    assert landed == sorted(e.id for e in early)  # the late ones were refused, not stored


def test_a_step_whose_keys_came_before_and_after_a_restart_ends_as_one_row_with_every_key(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    """Step 4's first key was stored before the kill; step 5's first row was still being retried (the platform
    answered 503) when the gateway died. After the restart each step gets a new key, and step 5 a newer value for
    its first: the platform holds one row per step with every key, each at its latest value."""
    run_id = create_run(platform, "train", "restart-merged-steps")
    resource = run_resource(run_id, "train")
    state = tmp_path / "state"
    metrics_path = "/api/v1/rft/metrics"

    def export(gateway_url: str, step: int, values: dict[str, float]) -> None:
        exporter = OTLPMetricExporter(endpoint=f"{gateway_url}/v1/metrics", headers=AUTH)
        assert exporter.export(step_metrics(resource, step, values)) is MetricExportResult.SUCCESS

    def rows() -> dict[int, dict[str, float]]:
        stored = platform.inspect.run(run_id)["metric_rows"]
        return {row["step"]: {k: v for k, v in row.items() if k not in ("step", "_timestamp")} for row in stored}

    first = start(platform, tmp_path / "first", state)
    try:
        export(first.http_url, 4, {"loss": 0.5})
        wait_for(lambda: rows().get(4) == {"loss": 0.5}, "step 4's first row to be stored")
        platform.inspect.add_fault(method="POST", path=metrics_path, action="fail_before", status=503, times=None)
        export(first.http_url, 5, {"loss": 0.25})
        wait_for(
            lambda: any(r["path"] == metrics_path and r["status"] == 503 for r in platform.inspect.requests(limit=500)),
            "step 5's first row to be refused for now",
        )
        kill(first)
    finally:
        first.stop()
        platform.inspect.clear_faults()
    assert 5 not in rows()
    with start(platform, tmp_path / "again", state) as again:
        export(again.http_url, 4, {"reward": 1.0})
        export(again.http_url, 5, {"loss": 0.125, "reward": 0.5})
        post(again, encode_spans([end_marker(resource, metric_rows=4)]).SerializeToString())
        closed = again.wait_closed(run_id)
    assert (closed["status"], closed["missing"]) == ("completed", 0)
    assert rows() == {4: {"loss": 0.5, "reward": 1.0}, 5: {"loss": 0.125, "reward": 0.5}}


def test_a_run_open_when_its_gateway_was_stopped_is_taken_up_by_the_next_start(
    platform: LocalPlatform, tmp_path: Path
) -> None:
    """SIGTERM drains what the gateway received and leaves the run open for the next start on the same state
    folder, which takes its later records and closes it complete (the stop does not close the run there)."""
    run_id = create_run(platform, "eval", "restart-after-sigterm")
    resource = run_resource(run_id, "eval")
    before, after = fresh_episodes("eval", 2), fresh_episodes("eval", 2)
    state = tmp_path / "state"
    with start(platform, tmp_path / "first", state) as first:
        send(first, resource, before)
    assert first.process.returncode is not None
    with start(platform, tmp_path / "again", state) as again:
        send(again, resource, after)
        end(again, resource, 4)
        closed = again.wait_closed(run_id)
    assert (closed["status"], closed["missing"]) == ("completed", 0)
    assert closed["received"]["0"]["episodes"] == 4
    rows = platform.inspect.samples(run_id)["items"]
    assert Counter(row["sample_id"] for row in rows) == Counter(e.id for e in before + after)
