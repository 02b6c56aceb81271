"""The released prime-runs 0.1.4 client, unchanged, against the local platform: everything it sends lands once."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import prime_runs
import pytest

from prime_otel.testing import LocalPlatform, start_local_platform
from tests._fixtures import episode_from_record, load_episodes, load_records

FIXTURES = Path(__file__).parent.parent / "fixtures"


@pytest.fixture
def released_client_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LocalPlatform, pytest.MonkeyPatch]]:
    platform = start_local_platform(tmp_path / "platform", metrics_rate_limit=1000, samples_rate_limit=1000)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PRIME_API_BASE_URL", platform.url)
    monkeypatch.setenv("PRIME_TRACES_URL", platform.url)
    monkeypatch.setenv("PRIME_API_KEY", platform.api_key)
    monkeypatch.setenv("PRIME_TEAM_ID", "team_abc")
    try:
        yield platform, monkeypatch
    finally:
        platform.stop()


def _training_episode(record: dict[str, Any], step: int, index: int) -> Any:
    varied = copy.deepcopy(record)
    varied["id"] = f"{record['id'][:24]}{step:04d}{index:04d}"
    for position, trace in enumerate(varied["traces"]):
        trace["id"] = f"{trace['id'][:20]}{step:04d}{index:04d}{position:04d}"
    varied["run"]["work"]["step"] = step
    return episode_from_record(varied)


def test_an_eval_lands_every_sample_and_episode_exactly_once(
    released_client_env: tuple[LocalPlatform, pytest.MonkeyPatch],
) -> None:
    platform, _ = released_client_env
    episodes = load_episodes("eval")
    run = prime_runs.init(name="released-eval", environments=["gsm8k"], model="Qwen/Qwen3-8B", framework="verifiers")
    run.log_episodes(episodes)
    run.finish(summary=prime_runs.metrics.from_episodes(episodes))

    snapshot = platform.inspect.run(run.id)
    assert snapshot["status"] in ("PROCESSING", "COMPLETED")
    assert snapshot["num_episodes"] == 3
    assert snapshot["summary"]["prime_runs"]["traces_episodes_written"] == 3
    landed = platform.inspect.episodes(run.id)["items"]
    assert len({episode["id"] for episode in landed}) == 3
    assert all(trace["run"]["id"] == run.id for episode in landed for trace in episode["traces"])
    assert snapshot["requests"].get("POST /api/v1/evaluations/", 0) == 1


def test_outside_the_traces_beta_the_released_client_falls_back_to_the_sample_table(
    released_client_env: tuple[LocalPlatform, pytest.MonkeyPatch],
) -> None:
    platform, _ = released_client_env
    platform.inspect.settings(traces="disabled")
    episodes = load_episodes("eval")
    run = prime_runs.init(name="released-fallback", environments=["gsm8k"], model="m", framework="verifiers")
    run.log_episodes(episodes)
    run.finish()
    rows = platform.inspect.samples(run.id)["items"]
    expected = json.loads((FIXTURES / "eval" / "samples.json").read_text())["samples"]
    assert rows == expected
    assert platform.inspect.run(run.id)["num_episodes"] == 0


def test_a_training_run_lands_one_metrics_row_per_step_and_its_episodes(
    released_client_env: tuple[LocalPlatform, pytest.MonkeyPatch],
) -> None:
    platform, _ = released_client_env
    platform.inspect.settings(traces="disabled")  # so the released client writes Parquet step objects
    records = load_records("train")
    run = prime_runs.init(kind="train", name="released-train", model="Qwen/Qwen3-8B", environments=["gsm8k"])
    for step in range(1, 31):
        if step % 10 == 0:
            run.log_episodes([_training_episode(record, step, i) for i, record in enumerate(records)])
        run.log_metrics({"loss": 1.0 / step, "reward": step / 30}, step=step)
    run.finish()

    snapshot = platform.inspect.run(run.id)
    assert snapshot["status"] == "COMPLETED"
    assert [row["step"] for row in snapshot["metric_rows"]] == list(range(1, 31))
    steps = platform.inspect.steps(run.id)
    assert [entry["step"] for entry in steps] == [10, 20, 30]
    for entry in steps:
        rows = platform.inspect.step_rows(run.id, entry["step"])["items"]
        assert len(rows) == 3
        assert len({row["sample_id"] for row in rows}) == 3
