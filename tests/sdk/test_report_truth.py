"""The delivery report tells the truth: ``(ok)`` and ``complete`` only when every record reached every sink it was
meant for and the platform confirmed the run's terminal status; otherwise it names what is missing and what to run.

Every case is checked three ways: what the platform holds, what ``run.report`` / ``report.json`` say, and the text
printed at finish. Where the report tells the user to run ``prime-otel sync``, the test runs exactly that command.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform
from tests._fixtures import fresh_records

ROOT = Path(__file__).resolve().parents[2]
TRACES = "/api/v1/traces"
FINALIZE = "/api/v1/evaluations/*/finalize"
SAMPLES = "/api/v1/evaluations/*/samples"


def sink(report: po.DeliveryReport, name: str) -> po.SinkReport:
    return next(s for s in report.sinks if s.sink == name)


def sink_line(printed: str, name: str) -> str:
    return next(line for line in printed.splitlines() if line.strip().startswith(name + " "))


def run_hinted_sync(printed: str, platform: LocalPlatform) -> subprocess.CompletedProcess[str]:
    """Runs the ``prime-otel sync <folder>`` the printed report asks for, as the user would."""
    found = re.search(r"prime-otel sync (\S+)", printed)
    assert found, f"the report names no sync command:\n{printed}"
    env = {**os.environ, **platform.env, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "prime_otel.cli", "sync", found.group(1)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def test_a_run_whose_records_all_arrived_and_whose_close_was_confirmed_is_ok(
    shared_platform_env: LocalPlatform, capsys: pytest.CaptureFixture[str]
) -> None:
    run = po.init(environments=["gsm8k"], model="m")
    run.log_episodes(fresh_records("eval", 3))
    live = run.report
    assert not live.complete and live.closure is po.Closure.OPEN  # a live run is not closed yet
    report = run.finish()

    assert report is not None and report.complete and report.closure is po.Closure.CONFIRMED
    printed = capsys.readouterr().err
    assert f"Run {run.id} completed" in printed
    assert "(ok)" in sink_line(printed, "traces") and "(ok)" in sink_line(printed, "eval_samples")
    assert "NOT COMPLETE" not in printed
    assert run.failed_records == {} and run.dropped_records == 0
    snapshot = shared_platform_env.inspect.run(run.id)
    assert snapshot["status"] in ("PROCESSING", "COMPLETED")
    assert snapshot["num_episodes"] == 3 and snapshot["num_samples"] == 3


def test_records_left_in_the_spool_are_never_ok_and_the_printed_sync_delivers_them(
    shared_platform_env: LocalPlatform, capsys: pytest.CaptureFixture[str]
) -> None:
    inspect = shared_platform_env.inspect
    inspect.add_fault(method="POST", path=TRACES, action="fail_before", status=429, retry_after=0, times=None)
    run = po.init(environments=["gsm8k"], model="m")
    run.log_episodes(fresh_records("eval", 4))
    report = run.finish(timeout=3)

    assert report is not None and not report.complete
    assert sink(report, "traces").pending == 4 and sink(report, "eval_samples").complete
    assert run.failed_records == {"traces": 4}  # not on the platform when finish() returned
    printed = capsys.readouterr().err
    traces_line = sink_line(printed, "traces")
    assert "(ok)" not in traces_line and "NOT COMPLETE" in traces_line and "4 still spooled" in traces_line
    assert "(ok)" in sink_line(printed, "eval_samples")
    assert report.folder is not None and f"prime-otel sync {report.folder}" in printed
    written = json.loads((Path(report.folder) / "report.json").read_text())
    assert written["complete"] is False
    assert {s["sink"]: (s["pending"], s["complete"]) for s in written["sinks"]} == {
        "traces": (4, False),
        "eval_samples": (0, True),
    }
    assert inspect.run(run.id)["num_episodes"] == 0

    inspect.clear_faults()
    synced = run_hinted_sync(printed, shared_platform_env)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert inspect.run(run.id)["num_episodes"] == 4


@pytest.mark.parametrize("spool", [True, False], ids=["with-spool", "without-spool"])
def test_a_close_that_never_reached_the_platform_is_not_claimed_and_the_printed_sync_closes_it(
    shared_platform_env: LocalPlatform, capsys: pytest.CaptureFixture[str], spool: bool
) -> None:
    """The finalize request fails before the server acts on it: the run is still RUNNING there, so the report
    must not say completed; the run folder it names (written on demand without a spool) lets sync close it."""
    inspect = shared_platform_env.inspect
    inspect.add_fault(method="POST", path=FINALIZE, action="fail_before", status=503, times=None)
    run = po.init(environments=["gsm8k"], model="m", spool=spool)
    run.log_episodes(fresh_records("eval", 2))
    report = run.finish(timeout=3)

    assert inspect.run(run.id)["status"] == "RUNNING"
    assert report is not None and report.closure is po.Closure.NOT_CONFIRMED and not report.complete
    assert report.records_complete  # the records did arrive; only the close is missing
    printed = capsys.readouterr().err
    assert f"Run {run.id} completed" not in printed
    assert f"Run {run.id} is NOT closed" in printed and "503" in printed
    assert report.folder is not None
    document = json.loads((Path(report.folder) / "run.json").read_text())
    assert (document["status"], document["closed_on_platform"]) == ("completed", False)
    assert json.loads((Path(report.folder) / "report.json").read_text())["closure"] == "not_confirmed"

    inspect.clear_faults()
    synced = run_hinted_sync(printed, shared_platform_env)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    snapshot = inspect.run(run.id)
    assert snapshot["status"] in ("PROCESSING", "COMPLETED") and snapshot["num_episodes"] == 2


def test_an_attached_run_that_fails_says_its_status_is_left_to_the_launcher(
    shared_platform_env: LocalPlatform, capsys: pytest.CaptureFixture[str]
) -> None:
    hosted = shared_platform_env.inspect.hosted_run("eval", name="launched")
    run = po.init(id=hosted["id"], api_key=hosted["token"], environments=["gsm8k"], model="m", sinks="traces")
    run.log_episodes(fresh_records("eval", 2))
    report = run.fail(RuntimeError("judge crashed"))

    assert report is not None and report.closure is po.Closure.LEFT_TO_LAUNCHER
    assert report.complete  # every record arrived, and the status is not this process's to set
    printed = capsys.readouterr().err
    assert "left to the launcher" in printed and f"Run {run.id} failed:" not in printed
    snapshot = shared_platform_env.inspect.run(hosted["id"])
    assert snapshot["status"] == "RUNNING" and snapshot["num_episodes"] == 2


def test_repeated_identical_failures_are_listed_once_with_their_count(shared_platform_env: LocalPlatform) -> None:
    shared_platform_env.inspect.add_fault(method="POST", path=SAMPLES, action="fail_before", status=400, times=None)
    run = po.init(environments=["gsm8k"], model="m", spool=False)
    for _ in range(3):
        run.log_episodes(fresh_records("eval", 1))
        assert run.flush(30)
    report = run.finish()

    samples_errors = [error for error in run.errors if "eval_samples" in error]
    assert len(samples_errors) == 1 and samples_errors[0].endswith("(3 times)")
    assert run.failed_records == {"eval_samples": 3}
    assert report is not None and not report.complete and sink(report, "eval_samples").failed == 3
    assert "3 failed" in sink(report, "eval_samples").line()
    assert shared_platform_env.inspect.run(run.id)["num_samples"] == 0


def test_an_offline_run_says_where_it_was_written_and_how_to_upload_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PRIME_RUNS_DIR", str(tmp_path / "runs"))
    run = po.init(mode="offline", environments=["gsm8k"], model="m")
    run.log_episodes(fresh_records("eval", 2))
    report = run.finish()

    assert report is not None and report.closure is po.Closure.WRITTEN_TO_FOLDER and report.complete
    printed = capsys.readouterr().err
    assert f"written to {run.folder}" in printed and f"prime-otel sync {run.folder}" in printed
    assert json.loads((Path(run.folder or "") / "run.json").read_text())["status"] == "completed"
