"""``prime_otel.init(transport="otlp")`` end to end through the gateway: what lands equals what in-process
export lands (the fixtures), and the run is closed by the gateway from the producer's end marker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform
from tests._fixtures import EVAL_RUN_ID, load_episodes, load_json
from tests.gateway._gateway import TEAM, Gateway
from tests.gateway._producer import fresh_episodes

_RUN_VARIABLES = ("PRIME_RUN_ID", "PRIME_RUN_OWNER_PID", "PRIME_RUN_KIND", "PRIME_RUNS_MODE", "PRIME_TRACES_OPT_OUT")


@pytest.fixture
def producer_env(
    platform: LocalPlatform, gateway: Gateway, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> LocalPlatform:
    monkeypatch.setenv("HOME", str(tmp_path))
    for name, value in platform.env.items():
        monkeypatch.setenv(name, value)
    for name in _RUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PRIME_TEAM_ID", TEAM)
    return platform


def _stamped(index: int, run_id: str) -> dict[str, Any]:
    return json.loads(json.dumps(load_json("eval", f"episode-{index}.stamped.json")).replace(EVAL_RUN_ID, run_id))  # type: ignore[no-any-return]


def test_an_eval_run_over_grpc_lands_the_same_rows_and_episodes_as_in_process_export(
    producer_env: LocalPlatform, gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sample table equals the fixture rows and Prime Traces the stamped fixture episodes."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://{gateway.grpc_endpoint}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    episodes = load_episodes("eval")
    run = po.init(name="otlp-init-eval", environments=["gsm8k"], model="Qwen/Qwen3-8B", transport="otlp")
    run.log_episodes(episodes)
    run.finish(summary=po.metrics.from_episodes(episodes))

    status = gateway.wait_closed(run.id)
    assert (status["status"], status["missing"]) == ("completed", 0)
    platform = producer_env
    snapshot = platform.inspect.run(run.id)
    assert snapshot["status"] in ("PROCESSING", "COMPLETED")
    assert snapshot["summary"]["avg_reward"] == pytest.approx(2 / 3)
    assert snapshot["summary"]["prime_runs"]["traces_episodes_written"] == 3
    assert platform.inspect.samples(run.id)["items"] == load_json("eval", "samples.json")["samples"]
    landed = platform.inspect.episodes(run.id)["items"]
    assert sorted(landed, key=lambda e: e["id"]) == sorted(
        (_stamped(i, run.id) for i in (1, 2, 3)), key=lambda e: e["id"]
    )


def test_a_training_run_over_http_gets_its_metric_rows_parquet_steps_and_completion(
    producer_env: LocalPlatform, gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", gateway.http_url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    run = po.init(kind="train", name="otlp-init-train", model="Qwen/Qwen3-8B", environments=["gsm8k"], transport="otlp")
    dispatched = {}
    for step in (1, 2):
        batch = fresh_episodes("train", 2, step=step)
        dispatched[step] = sorted(episode.id for episode in batch)
        run.log_episodes(batch)
        run.log_metrics({"loss": 1.0 / step, "reward": step / 2}, step=step)
    run.finish()

    status = gateway.wait_closed(run.id)
    assert (status["status"], status["missing"]) == ("completed", 0)
    platform = producer_env
    snapshot = platform.inspect.run(run.id)
    assert snapshot["status"] == "COMPLETED"
    assert [(row["step"], row["loss"], row["reward"]) for row in snapshot["metric_rows"]] == [
        (1, 1.0, 0.5),
        (2, 0.5, 1.0),
    ]
    for step in (1, 2):
        rows = platform.inspect.step_rows(run.id, step)["items"]
        assert sorted(json.loads(row["info"])["native_wrapper"]["id"] for row in rows) == dispatched[step]
