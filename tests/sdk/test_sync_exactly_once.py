"""``prime-otel sync`` of an offline run leaves every record on the platform once, however it is stopped.

Syncs run as the ``prime-otel`` command in subprocesses where they are killed or interrupted, and in-process
(``main``) otherwise; what the platform holds is read back from its ``/_local/`` inspection API.
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.cli import main
from prime_otel.offline import _progress
from prime_otel.testing import LocalPlatform, start_local_platform
from tests._fixtures import fresh_records
from tests._platform import isolate_sdk
from tests._waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
TEAM = "team_exactly_once"
WAIT_SECONDS = 60.0
SEED = 19
EVAL_TRIALS = 10
TRAIN_TRIALS = 6


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    with start_local_platform(tmp_path_factory.mktemp("exactly-once"), processing_delay=0.05) as server:
        yield server


@pytest.fixture
def runs_dir(platform: LocalPlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Runs and syncs of this test point at the module's platform and write under the test's directory."""
    isolate_sdk(platform, monkeypatch, tmp_path / "home", tmp_path / "runs", team=TEAM)
    yield tmp_path / "runs"
    platform.inspect.clear_faults()


def offline_eval(name: str, count: int) -> Path:
    run = po.init(mode="offline", name=name, environments=["gsm8k"], model="m", config={"seed": 1})
    run.log_episodes(fresh_records("eval", count))
    run.finish(summary={"avg_reward": 0.5})
    return Path(run.folder or "")


def offline_training(name: str, steps: int, per_step: int) -> Path:
    run = po.init(mode="offline", kind="train", name=name, environments=["gsm8k"], model="m", samples_step_interval=1)
    for step in range(steps):
        records = fresh_records("train", per_step)
        for record in records:
            record["run"]["work"]["step"] = step
        run.log_episodes(records)
        run.log_metrics({"loss": 1.0 / (step + 1)}, step=step)
    run.finish()
    return Path(run.folder or "")


def start_sync(folder: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "prime_otel.cli", "sync", str(folder)]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def sync_here(folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    returncode = main(["sync", str(folder)])
    captured = capsys.readouterr()
    return returncode, captured.out, captured.err


def ledger(folder: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((folder / "sync.json").read_text()))
    except (FileNotFoundError, ValueError):
        return {}


def run_named(platform: LocalPlatform, name: str) -> str:
    (found,) = [run["id"] for run in platform.inspect.runs() if run["name"] == name]
    return str(found)


def requests_to(platform: LocalPlatform, run_id: str, method: str, suffix: str) -> int:
    return sum(
        1
        for r in platform.inspect.requests(limit=10_000, run_id=run_id)
        if r["method"] == method and r["path"].endswith(suffix)
    )


def last_seq(platform: LocalPlatform) -> int:
    requests = platform.inspect.requests(limit=1)
    return int(requests[-1]["seq"]) if requests else 0


def test_a_second_sync_of_a_folder_being_synced_says_who_holds_it_and_sends_nothing(
    platform: LocalPlatform, runs_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = offline_eval("two-syncs", 6)
    platform.inspect.add_fault(method="POST", path="/api/v1/traces", action="delay", delay_s=3.0)
    first = start_sync(folder)
    try:
        wait_for(lambda: ledger(folder).get("platform_id") is not None, "the first sync to register the run")
        seen = last_seq(platform)

        returncode, out, err = sync_here(folder, capsys)

        assert returncode == 1 and out == ""
        assert f"being delivered by another prime-otel sync (process {first.pid} on {socket.gethostname()}" in err
        assert "nothing was sent" in err
        assert [r for r in platform.inspect.requests(limit=10_000) if r["seq"] > seen] == []
    finally:
        stdout, stderr = first.communicate(timeout=WAIT_SECONDS)
    assert first.returncode == 0, stdout + stderr
    run_id = run_named(platform, "two-syncs")
    assert platform.inspect.samples(run_id)["total"] == 6
    assert requests_to(platform, run_id, "POST", "/samples") == 1
    assert requests_to(platform, run_id, "POST", "/finalize") == 1


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_an_interrupted_sync_says_in_one_line_what_it_sent_and_the_next_one_sends_the_rest_once(
    platform: LocalPlatform, runs_dir: Path, capsys: pytest.CaptureFixture[str], how: signal.Signals
) -> None:
    """Interrupted while its samples POST is in flight (the server still applies it): one line, no traceback;
    the next sync reads the rows back, finds them stored, and does not send them again."""
    name = f"interrupted-{how.name}"
    folder = offline_eval(name, 5)
    platform.inspect.add_fault(method="POST", path="/api/v1/evaluations/*/samples", action="delay", delay_s=2.0)
    running = start_sync(folder)
    wait_for(lambda: ledger(folder).get("sample_intent") is not None, "the samples POST's intent")
    time.sleep(0.5)  # the POST is at the server now, which holds it for two seconds
    running.send_signal(how)
    stdout, stderr = running.communicate(timeout=WAIT_SECONDS)

    assert running.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr and stdout == ""
    (line,) = stderr.strip().splitlines()
    assert line.startswith("prime-otel sync: interrupted; sent episodes.jsonl 5 in ")
    assert f"Run 'prime-otel sync {folder}' again" in line
    run_id = run_named(platform, name)
    wait_for(lambda: platform.inspect.samples(run_id)["total"] == 5, "the server to apply the interrupted POST")

    returncode, out, err = sync_here(folder, capsys)

    assert returncode == 0, out + err
    assert "closed it as completed" in out and "may be missing" not in out
    assert platform.inspect.samples(run_id)["total"] == 5
    assert requests_to(platform, run_id, "POST", "/samples") == 1


def test_a_sync_resumed_at_once_waits_for_the_request_its_killed_predecessor_left_on_a_slow_server(
    platform: LocalPlatform, runs_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server takes four seconds to apply the samples POST; the sync that sent it is killed and a new one
    starts before the server is done: it must not take "not stored yet" for "not stored"."""
    folder = offline_eval("resumed-at-once", 4)
    platform.inspect.add_fault(method="POST", path="/api/v1/evaluations/*/samples", action="delay", delay_s=4.0)
    running = start_sync(folder)
    wait_for(lambda: ledger(folder).get("sample_intent") is not None, "the samples POST to be in flight")
    time.sleep(0.5)  # the POST is at the server now, which holds it for four seconds
    running.send_signal(signal.SIGKILL)
    running.communicate(timeout=WAIT_SECONDS)

    returncode, out, err = sync_here(folder, capsys)

    assert returncode == 0, out + err
    run_id = run_named(platform, "resumed-at-once")

    def held_post_ended() -> bool:
        posts = platform.inspect.requests(limit=10_000, run_id=run_id)
        return any(r.get("fault") and r["path"].endswith("/samples") for r in posts)

    wait_for(held_post_ended, "the server to finish the POST it held")
    assert platform.inspect.samples(run_id)["total"] == 4
    assert requests_to(platform, run_id, "POST", "/samples") == 1


@pytest.mark.parametrize("kind", ["eval", "train"])
def test_a_finalize_of_a_run_already_closed_with_that_status_is_a_success(
    platform: LocalPlatform, runs_dir: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """A sync killed just after the platform applied its finalize, before its ledger said so: the next sync
    finalizes again, the platform says the run is already closed with that status, and that is success."""
    name = f"closed-twice-{kind}"
    folder = offline_eval(name, 2) if kind == "eval" else offline_training(name, 1, 2)
    first = sync_here(folder, capsys)
    assert first[0] == 0, first
    run_id = run_named(platform, name)
    document = ledger(folder)
    (folder / "sync.json").write_text(json.dumps({**document, "closed": False}))
    expected = platform.inspect.run(run_id)["status"]

    for _ in range(2):  # a script retrying until success stops at once
        returncode, out, err = sync_here(folder, capsys)
        assert returncode == 0, out + err
    assert platform.inspect.run(run_id)["status"] in {expected, "COMPLETED"}
    if kind == "eval":
        assert platform.inspect.samples(run_id)["total"] == 2


def test_a_long_sync_prints_progress_and_counts_the_requests_it_retried(
    platform: LocalPlatform, runs_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_progress, "PROGRESS_SECONDS", 0.0)
    folder = offline_training("progress", 3, 2)
    platform.inspect.add_fault(method="POST", path="/api/v1/rft/metrics", action="rate_limit", retry_after=0)

    returncode, out, err = sync_here(folder, capsys)

    assert returncode == 0, out + err
    assert "step objects 3" in out and "metrics.jsonl 3" in out and "(1 retried)" in out
    progress = [line for line in err.splitlines() if line.startswith(f"prime-otel sync {folder}: sent ")]
    assert progress and "step objects 3" in progress[-1] and "1 retried" in progress[-1]


# -- killed at random moments -----------------------------------------------------------------------

EVAL_FAULTS: list[dict[str, Any]] = [
    {"method": "POST", "path": "/api/v1/evaluations/*/samples", "action": "fail_after", "status": 502},
    {"method": "POST", "path": "/api/v1/evaluations/*/samples", "action": "reset_after"},
    {"method": "POST", "path": "/api/v1/evaluations/*/samples", "action": "fail_before", "status": 503},
    {"method": "POST", "path": "/api/v1/evaluations/*/samples", "action": "delay", "delay_s": 0.5},
    {"method": "POST", "path": "/api/v1/traces", "action": "reset_after"},
    {"method": "POST", "path": "/api/v1/traces", "action": "delay", "delay_s": 0.4},
    {"method": "POST", "path": "/api/v1/evaluations/*/finalize", "action": "fail_after", "status": 502},
    {"method": "POST", "path": "/api/v1/evaluations/*/finalize", "action": "delay", "delay_s": 0.4},
]
TRAIN_FAULTS: list[dict[str, Any]] = [
    {"method": "POST", "path": "/api/v1/rft/samples/confirm", "action": "reset_after"},
    {"method": "POST", "path": "/api/v1/rft/samples/confirm", "action": "delay", "delay_s": 0.3},
    {"method": "POST", "path": "/api/v1/rft/samples/confirm", "action": "fail_after", "status": 502},
    {"method": "POST", "path": "/api/v1/traces", "action": "reset_after"},
    {"method": "POST", "path": "/api/v1/rft/finalize", "action": "fail_after", "status": 502},
    {"method": "POST", "path": "/api/v1/rft/metrics", "action": "delay", "delay_s": 0.3},
]


def killed_at_random(
    platform: LocalPlatform, folder: Path, chooser: random.Random, faults: list[dict[str, Any]]
) -> bool:
    """Start a sync under two of ``faults``, SIGKILL it at a random moment once it registered the run; whether
    it was still running when killed. (The create call itself cannot be read back: the platform has no lookup of
    a run by anything the folder knows, so an interrupted create is a clear error instead; kills come after it.)"""
    for rule in chooser.sample(faults, 2):
        platform.inspect.add_fault(**rule)
    running = start_sync(folder)
    wait_for(lambda: ledger(folder).get("platform_id") is not None or running.poll() is not None, "a registration")
    time.sleep(chooser.uniform(0.0, 0.8))
    alive = running.poll() is None
    running.send_signal(signal.SIGKILL)
    running.communicate(timeout=WAIT_SECONDS)
    platform.inspect.clear_faults()
    return alive


def final_sync(folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    returncode, out, err = sync_here(folder, capsys)
    assert returncode == 0, out + err
    assert "may be missing" not in out
    return out


def test_syncs_killed_at_random_moments_under_faults_leave_every_eval_record_once(
    platform: LocalPlatform, runs_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chooser = random.Random(SEED)
    killed = 0
    for trial in range(EVAL_TRIALS):
        name = f"crash-eval-{trial}"
        count = chooser.randint(3, 12)
        folder = offline_eval(name, count)
        killed += killed_at_random(platform, folder, chooser, EVAL_FAULTS)
        final_sync(folder, capsys)

        run_id = run_named(platform, name)
        snapshot = platform.inspect.run(run_id)
        assert snapshot["status"] in ("PROCESSING", "COMPLETED"), (trial, snapshot["status"])
        assert snapshot["num_episodes"] == count, trial
        samples = platform.inspect.samples(run_id)["items"]
        keys = collections.Counter((row["sample_id"], row["rollout_number"]) for row in samples)
        assert len(samples) == count and set(keys.values()) == {1}, (trial, keys)
        block = snapshot["summary"]["prime_runs"]
        assert block["traces_episodes_written"] == count, trial
        assert block["delivery"]["eval_samples"]["delivered"] == count, trial
        assert snapshot["summary"]["avg_reward"] == 0.5
    assert killed >= EVAL_TRIALS // 2, f"only {killed} of {EVAL_TRIALS} syncs were killed while running"


def test_syncs_killed_at_random_moments_under_faults_leave_every_training_record_once(
    platform: LocalPlatform, runs_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chooser = random.Random(SEED + 1)
    killed = 0
    for trial in range(TRAIN_TRIALS):
        name = f"crash-train-{trial}"
        steps, per_step = chooser.randint(2, 5), chooser.randint(1, 3)
        folder = offline_training(name, steps, per_step)
        killed += killed_at_random(platform, folder, chooser, TRAIN_FAULTS)
        final_sync(folder, capsys)

        run_id = run_named(platform, name)
        snapshot = platform.inspect.run(run_id)
        assert snapshot["status"] == "COMPLETED", (trial, snapshot["status"])
        assert snapshot["num_episodes"] == steps * per_step, trial
        assert [(row["step"], row["loss"]) for row in snapshot["metric_rows"]] == [
            (step, pytest.approx(1.0 / (step + 1))) for step in range(steps)
        ], trial
        assert [(entry["step"], entry["num_rows"]) for entry in platform.inspect.steps(run_id)] == [
            (step, per_step) for step in range(steps)
        ], trial
        assert all(len(entry["objects"]) == 1 for entry in platform.inspect.steps(run_id)), trial
    assert killed >= TRAIN_TRIALS // 2, f"only {killed} of {TRAIN_TRIALS} syncs were killed while running"


def test_a_sample_row_the_platform_refuses_costs_only_itself_and_is_counted_with_the_reason(
    platform: LocalPlatform, runs_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The platform refuses the packed samples request (one row is over its size limit): the request is split
    until only that row is left; the others are stored once, the refused one is counted with the reason."""
    run = po.init(mode="offline", name="refused-row", environments=["gsm8k"], model="m")
    records = fresh_records("eval", 5)
    records[2]["task"]["data"]["padding"] = "x" * 60_000
    run.log_episodes(records)
    run.finish()
    platform.inspect.settings(samples_max_bytes=40_000)
    try:
        returncode, out, err = sync_here(Path(run.folder or ""), capsys)
    finally:
        platform.inspect.settings(samples_max_bytes=25 * 1024 * 1024)

    assert returncode == 2, out + err
    assert "the eval_samples sink refused 1 records for good (rejected by the platform: 413" in out
    run_id = run_named(platform, "refused-row")
    stored = {row["episode_id"] for row in platform.inspect.samples(run_id)["items"]}
    assert stored == {record["id"] for position, record in enumerate(records) if position != 2}
    seen = last_seq(platform)
    again = sync_here(Path(run.folder or ""), capsys)
    assert again[0] == 2 and "nothing new" in again[1] and "refused 1 records for good" in again[1], again
    assert [r for r in platform.inspect.requests(limit=10_000) if r["seq"] > seen] == []


def test_a_sync_of_a_live_online_runs_folder_is_refused_naming_its_producer(
    platform: LocalPlatform, runs_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An online run's spool is still being written and replayed by its producer: a sync would race it."""
    run = po.init(name="live-online", environments=["gsm8k"], model="m")
    try:
        run.log_episodes(fresh_records("eval", 2))
        assert run.flush(timeout=30)
        seen = last_seq(platform)

        returncode, out, err = sync_here(runs_dir / run.id, capsys)

        assert returncode == 1 and out == ""
        assert f"still being written by its producer (process {os.getpid()} on {socket.gethostname()}" in err
        assert [r for r in platform.inspect.requests(limit=10_000) if r["seq"] > seen] == []
    finally:
        report = run.finish()
    assert report is not None and report.complete
    assert platform.inspect.run(run.id)["num_episodes"] == 2
