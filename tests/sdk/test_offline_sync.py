"""Offline runs on disk (a real run: local id, no network, append-only files), and ``prime-otel sync`` later."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform
from tests._fixtures import load_episodes, load_json


def _sync(folder: str, platform: LocalPlatform, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), **platform.env}
    return subprocess.run(
        [sys.executable, "-m", "prime_otel.cli", "sync", folder], env=env, capture_output=True, text=True, timeout=120
    )


def test_an_offline_eval_is_a_real_run_on_disk_readable_while_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIME_RUNS_DIR", str(tmp_path / "runs"))
    run = po.init(mode="offline", environments=["gsm8k"], model="m", config={"a": 1})
    assert run.id.startswith("offline-") and run.url is None
    run.log_episodes(load_episodes("eval"))
    folder = Path(run.folder or "")
    lines = (folder / "episodes.jsonl").read_text().splitlines()
    assert [json.loads(line)["run"]["id"] for line in lines] == [run.id] * 3  # no flush needed
    run.finish(summary={"avg_reward": 0.5})
    document = json.loads((folder / "run.json").read_text())
    assert document["status"] == "completed" and document["summary"] == {"avg_reward": 0.5}
    assert document["environments"] == [{"name": "gsm8k"}] and document["config"] == {"a": 1}


def test_sync_uploads_an_offline_run_once_and_closes_it_with_the_recorded_status(
    shared_platform_env: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIME_RUNS_DIR", str(tmp_path / "runs"))
    run = po.init(mode="offline", name="offline-eval", environments=["gsm8k"], model="m", framework="verifiers")
    run.log_episodes(load_episodes("eval"))
    run.fail(RuntimeError("judge crashed"))

    first = _sync(run.folder or "", shared_platform_env, tmp_path)
    assert first.returncode == 0, first.stderr
    runs = [r for r in shared_platform_env.inspect.runs() if r["name"] == "offline-eval"]
    assert len(runs) == 1
    snapshot = shared_platform_env.inspect.run(runs[0]["id"])
    assert snapshot["status"] == "FAILED" and snapshot["error_message"] == "RuntimeError: judge crashed"
    assert snapshot["num_episodes"] == 3
    assert shared_platform_env.inspect.samples(runs[0]["id"])["items"] == load_json("eval", "samples.json")["samples"]

    requests_before = sum(shared_platform_env.inspect.run(runs[0]["id"])["requests"].values())
    second = _sync(run.folder or "", shared_platform_env, tmp_path)
    assert second.returncode == 0, second.stderr
    assert "nothing new" in second.stdout
    assert sum(shared_platform_env.inspect.run(runs[0]["id"])["requests"].values()) == requests_before
    assert len([r for r in shared_platform_env.inspect.runs() if r["name"] == "offline-eval"]) == 1


def _sample_posts(platform: LocalPlatform, run_id: str) -> int:
    return sum(
        1
        for r in platform.inspect.requests(limit=10_000, run_id=run_id)
        if r["method"] == "POST" and r["path"].endswith("/samples")
    )


def test_an_ambiguous_sample_failure_during_sync_is_read_back_and_never_resent(
    shared_platform_env: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server stored the rows but its answer was a 502: the sync reads the evaluation's rows back, finds
    them stored, does not send them again and reports nothing missing."""
    monkeypatch.setenv("PRIME_RUNS_DIR", str(tmp_path / "runs"))
    run = po.init(mode="offline", name="offline-ambiguous", environments=["gsm8k"], model="m")
    run.log_episodes(load_episodes("eval"))
    run.finish()
    shared_platform_env.inspect.add_fault(
        method="POST", path="/api/v1/evaluations/*/samples", action="fail_after", status=502
    )
    first = _sync(run.folder or "", shared_platform_env, tmp_path)
    assert first.returncode == 0 and "may be missing" not in first.stdout, first.stdout + first.stderr
    second = _sync(run.folder or "", shared_platform_env, tmp_path)
    assert second.returncode == 0 and "nothing new" in second.stdout
    run_id = next(r["id"] for r in shared_platform_env.inspect.runs() if r["name"] == "offline-ambiguous")
    assert shared_platform_env.inspect.samples(run_id)["items"] == load_json("eval", "samples.json")["samples"]
    assert _sample_posts(shared_platform_env, run_id) == 1


def test_sample_rows_the_read_back_cannot_decide_are_reported_possibly_missing_and_never_resent(
    shared_platform_env: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIME_RUNS_DIR", str(tmp_path / "runs"))
    run = po.init(mode="offline", name="offline-undecided", environments=["gsm8k"], model="m")
    run.log_episodes(load_episodes("eval"))
    run.finish()
    shared_platform_env.inspect.add_fault(
        method="POST", path="/api/v1/evaluations/*/samples", action="fail_after", status=502
    )
    shared_platform_env.inspect.add_fault(
        method="GET", path="/api/v1/evaluations/*/samples", action="fail_before", status=500, times=None
    )
    try:
        first = _sync(run.folder or "", shared_platform_env, tmp_path)
    finally:
        shared_platform_env.inspect.clear_faults()
    assert first.returncode == 2 and "3 records may be missing" in first.stdout, first.stdout + first.stderr
    second = _sync(run.folder or "", shared_platform_env, tmp_path)
    assert second.returncode == 2 and "may be missing" in second.stdout
    run_id = next(r["id"] for r in shared_platform_env.inspect.runs() if r["name"] == "offline-undecided")
    assert shared_platform_env.inspect.run(run_id)["num_samples"] == 3  # the server did the work once
    assert _sample_posts(shared_platform_env, run_id) == 1
