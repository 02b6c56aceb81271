"""Plain OpenTelemetry APIs (a tracer and a meter only) give the same platform records as the facade (issue 5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform
from tests._fixtures import load_json, load_records, load_stamped


def _restamped(kind: str, run_id: str, fixture_id: str) -> list[dict[str, Any]]:
    return [json.loads(json.dumps(line).replace(fixture_id, run_id)) for line in load_stamped(kind)]


def test_episode_spans_from_a_tracer_land_like_log_episodes(shared_platform_env: LocalPlatform) -> None:
    run = po.init(name="plain-api-eval", environments=["gsm8k"], model="m", framework="verifiers")
    tracer = run.tracer()
    assert tracer is not None
    for record in load_records("eval"):
        with tracer.start_as_current_span("episode", attributes={"prime.record.json": json.dumps(record)}):
            pass
    report = run.finish()

    assert report is not None and report.complete, report.render()
    assert shared_platform_env.inspect.samples(run.id)["items"] == load_json("eval", "samples.json")["samples"]
    landed = sorted(shared_platform_env.inspect.episodes(run.id)["items"], key=lambda e: e["id"])
    assert landed == sorted(_restamped("eval", run.id, "eval-3f9c2a71d4"), key=lambda e: e["id"])


@pytest.fixture
def team_env(shared_platform_env: LocalPlatform, monkeypatch: pytest.MonkeyPatch) -> LocalPlatform:
    monkeypatch.setenv("PRIME_TEAM_ID", "team_abc")
    return shared_platform_env


def test_step_metrics_from_a_meter_land_as_one_row_per_step(team_env: LocalPlatform, tmp_path: Path) -> None:
    run = po.init(kind="train", model="m", environments=["gsm8k"])
    meter = run.meter()
    assert meter is not None
    loss = meter.create_histogram("loss")
    tokens = meter.create_counter("tokens")
    for step in range(1, 6):
        loss.record(1.0 / step, {"prime.run.step": step})
        tokens.add(100 * step, {"prime.run.step": step})
        if step % 2 == 0:
            assert run.flush(30)  # rows are collected at flushes and at finish, whatever the producer does
    run.finish()
    rows = team_env.inspect.run(run.id)["metric_rows"]
    assert [row["step"] for row in rows] == [1, 2, 3, 4, 5]
    assert [row["loss"] for row in rows] == pytest.approx([1.0, 0.5, 1 / 3, 0.25, 0.2])
    assert [row["tokens"] for row in rows] == [100, 200, 300, 400, 500]
