"""An offline run whose disk fills: what could not be written is counted failed with the reason, the producer's
calls and ``finish()`` never raise ``OSError``, and a later sync delivers what the folder holds, nothing torn."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform
from tests._disk import fill, tmpfs
from tests._fixtures import episode_from_record, fresh_records

ROOT = Path(__file__).resolve().parents[2]


def offline_sink(report: po.DeliveryReport | None) -> po.SinkReport:
    assert report is not None
    return next(s for s in report.sinks if s.sink == "offline")


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True) if path.exists() else []


def sync(folder: Path, platform: LocalPlatform, home: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "PYTHONPATH": str(ROOT), **platform.env}
    command = [sys.executable, "-m", "prime_otel.cli", "sync", str(folder)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def test_an_offline_eval_on_a_disk_that_fills_counts_what_it_could_not_write_and_sync_sends_what_it_wrote(
    shared_platform_env: LocalPlatform,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A real 96 KiB filesystem as PRIME_RUNS_DIR fills part way through the run: every call returns, the records
    written and those counted failed add up to what was logged, and the failures name the full disk."""
    total = 60  # about 230 kB of episodes and sample rows: the disk fills part way
    with tmpfs(tmp_path / "small-disk", 96) as mount:
        monkeypatch.setenv("PRIME_RUNS_DIR", str(mount))
        run = po.init(mode="offline", name="offline-full-disk", environments=["gsm8k"], model="m")
        folder = Path(run.folder or "")
        for _ in range(0, total, 5):
            run.log_episodes([episode_from_record(record) for record in fresh_records("eval", 5)])
        report = run.finish()
        copied = tmp_path / "copied" / folder.name
        shutil.copytree(folder, copied)

    offline = offline_sink(report)
    assert offline.delivered > 0 and offline.failed > 0 and offline.delivered + offline.failed == total
    ((reason, count),) = offline.failure_reasons.items()
    assert reason.startswith(f"disk full: {folder}/") and count == offline.failed
    assert report is not None and not report.complete and not offline.complete
    assert f"{offline.failed} failed (disk full: {folder}/" in offline.line()
    assert "disk full" in capsys.readouterr().err
    assert all(line.endswith(b"\n") for name in ("episodes.jsonl", "samples.jsonl") for line in lines(copied / name))

    synced = sync(copied, shared_platform_env, tmp_path)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert "unreadable" not in synced.stdout
    run_id = next(r["id"] for r in shared_platform_env.inspect.runs() if r["name"] == "offline-full-disk")
    snapshot = shared_platform_env.inspect.run(run_id)
    assert snapshot["num_samples"] == offline.delivered
    # A record whose episode line was written before its sample row could not be counts failed, yet its episode
    # reaches Prime Traces.
    assert offline.delivered <= snapshot["num_episodes"] <= offline.delivered + 1


def test_an_offline_training_run_on_a_full_disk_counts_every_record_and_metric_row_and_stays_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills after two episodes: the metric rows and episodes logged later are counted failed with the
    reason, even once space is back (the writer stopped), and neither the calls nor finish() raise."""
    with tmpfs(tmp_path / "small-disk", 64) as mount:
        monkeypatch.setenv("PRIME_RUNS_DIR", str(mount))
        run = po.init(mode="offline", kind="train", environments=["gsm8k"], model="m")
        folder = Path(run.folder or "")
        run.log_episodes(fresh_records("train", 2))
        fill(mount)
        run.log_metrics({"loss": 0.5}, step=1)
        run.log_episodes(fresh_records("train", 3))
        (mount / "filler").unlink()
        run.log_metrics({"loss": 0.25}, step=2)
        report = run.finish()
        written = {name: len(lines(folder / name)) for name in ("episodes.jsonl", "metrics.jsonl")}
        document = json.loads((folder / "run.json").read_text())

    offline = offline_sink(report)
    assert (offline.delivered, offline.failed) == (2, 5)
    assert offline.failure_reasons == {f"disk full: {folder / 'metrics.jsonl'}": 5}
    assert report is not None and not report.complete and report.closure is po.Closure.WRITTEN_TO_FOLDER
    assert written == {"episodes.jsonl": 2, "metrics.jsonl": 0}
    assert document["status"] == "completed"
