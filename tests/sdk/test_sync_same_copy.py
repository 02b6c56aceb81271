"""An offline run synced later lands on the platform as the same run an online run of the same records makes:
the same episodes, sample rows, Parquet step rows, metric rows, summary, status and config source."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform
from tests._fixtures import fresh_records, load_episodes

ROOT = Path(__file__).resolve().parents[2]
STEP_INTERVAL = 2


def sync(folder: str, platform: LocalPlatform, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "PYTHONPATH": str(ROOT), **platform.env}
    command = [sys.executable, "-m", "prime_otel.cli", "sync", folder]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def run_named(platform: LocalPlatform, name: str) -> str:
    (found,) = [run["id"] for run in platform.inspect.runs() if run["name"] == name]
    return str(found)


def settled(platform: LocalPlatform, run_id: str) -> dict[str, Any]:
    """The run once the platform finished processing its finalize (an eval goes PROCESSING, then COMPLETED)."""
    deadline = time.monotonic() + 30
    while (snapshot := platform.inspect.run(run_id))["status"] == "PROCESSING" and time.monotonic() < deadline:
        time.sleep(0.05)
    return snapshot


def without_run_id(value: Any, run_id: str) -> Any:
    """``value`` with the platform's run id replaced, so two runs' copies of one record compare equal."""
    return json.loads(json.dumps(value).replace(run_id, "<run>"))


def parquet_row(row: dict[str, Any]) -> dict[str, Any]:
    """A Parquet row without its upload time, and with the record copy in ``info`` unstamped: the offline folder
    keeps each record stamped with its run (what Prime Traces gets), where a live run embeds the record exactly
    as the producer logged it."""
    row = {key: value for key, value in row.items() if key != "created_at"}
    info = json.loads(row["info"]) if isinstance(row.get("info"), str) else None
    if isinstance(info, dict) and isinstance(info.get("native_wrapper"), dict):
        wrapper = info["native_wrapper"]
        wrapper.pop("run", None)
        for trace in wrapper.get("traces", []):
            trace.pop("run", None)
        row["info"] = info
    return row


def comparable(platform: LocalPlatform, run_id: str) -> dict[str, Any]:
    snapshot = settled(platform, run_id)
    steps = platform.inspect.steps(run_id)
    copy_of_run = {
        "status": snapshot["status"],
        "error_message": snapshot["error_message"],
        "metadata": snapshot.get("metadata"),
        "run_config": snapshot.get("run_config"),
        "config_source": snapshot.get("config_source"),
        "summary": snapshot.get("summary"),
        "metric_rows": [{k: v for k, v in row.items() if k != "_timestamp"} for row in snapshot["metric_rows"]],
        "episodes": sorted(platform.inspect.episodes(run_id)["items"], key=lambda item: str(item["id"])),
        "samples": platform.inspect.samples(run_id)["items"],
        "steps": [(step["step"], step["num_rows"]) for step in steps],
        "step_rows": {
            step["step"]: sorted(
                (parquet_row(row) for row in platform.inspect.step_rows(run_id, step["step"])["items"]),
                key=lambda row: json.dumps(row, sort_keys=True),
            )
            for step in steps
        },
    }
    return without_run_id(copy_of_run, run_id)


@pytest.mark.parametrize("records", ["verifiers episodes", "JSON records"])
def test_an_offline_eval_synced_later_is_the_same_run_as_an_online_one(
    shared_platform_env: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, records: str
) -> None:
    monkeypatch.setenv("PRIME_RUNS_DIR", str(tmp_path / "runs"))
    config_file = tmp_path / "eval.toml"
    config_file.write_text('model = "m"\nrollouts = 2\n')
    logged = load_episodes("eval") if records == "verifiers episodes" else fresh_records("eval", 5)
    copies = {}
    for mode in ("online", "offline"):
        name = f"same-eval-{mode}-{records.split()[0]}"
        run = po.init(
            mode=mode, name=name, environments=["gsm8k"], model="m", framework="verifiers", config=config_file
        )
        run.log_episodes(copy.deepcopy(logged))
        run.finish(summary={"avg_reward": 0.5, "avg_metrics": {"correct": 0.5}})
        if mode == "offline":
            synced = sync(run.folder or "", shared_platform_env, tmp_path)
            assert synced.returncode == 0, synced.stdout + synced.stderr
        copies[mode] = comparable(shared_platform_env, run_named(shared_platform_env, name))

    online, offline = copies["online"], copies["offline"]
    assert len(online["samples"]) == len(logged) and len(online["episodes"]) == len(logged)
    assert online["summary"]["prime_runs"]["traces_episodes_written"] == len(logged)
    assert online["config_source"]["text"] == config_file.read_text()
    for field in online:
        assert offline[field] == online[field], field


def test_an_offline_training_run_synced_later_is_the_same_run_as_an_online_one(
    shared_platform_env: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every second step's episodes become that step's Parquet object, the metric rows one per step."""
    monkeypatch.setenv("PRIME_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("PRIME_TEAM_ID", "team_same")
    logged = []
    for step in range(6):
        for record in fresh_records("train", 3):
            record["run"]["work"]["step"] = step
            logged.append(record)
    copies = {}
    for mode in ("online", "offline"):
        name = f"same-train-{mode}"
        run = po.init(
            mode=mode,
            kind="train",
            name=name,
            environments=["gsm8k"],
            model="m",
            config={"lr": 0.1},
            samples_step_interval=STEP_INTERVAL,
        )
        for step in range(6):
            run.log_episodes(copy.deepcopy([r for r in logged if r["run"]["work"]["step"] == step]))
            run.log_metrics({"loss": 1.0 / (step + 1), "reward": step / 10}, step=step)
        run.finish()
        if mode == "offline":
            synced = sync(run.folder or "", shared_platform_env, tmp_path)
            assert synced.returncode == 0, synced.stdout + synced.stderr
            assert "step objects 3" in synced.stdout
        copies[mode] = comparable(shared_platform_env, run_named(shared_platform_env, name))

    online, offline = copies["online"], copies["offline"]
    assert online["steps"] == [[0, 3], [2, 3], [4, 3]] and len(online["metric_rows"]) == 6
    assert len(online["episodes"]) == len(logged)
    for field in online:
        assert offline[field] == online[field], field
