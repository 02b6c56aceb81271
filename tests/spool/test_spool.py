"""Nothing lost (issue 6): the durable spool, safe replay and the delivery report, against the local platform."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform, start_local_platform
from tests._fixtures import numbered_record
from tests._platform import point_sdk_at

ROOT = Path(__file__).resolve().parents[2]


def every(fetch: Any, run_id: str) -> list[dict[str, Any]]:
    """All items of a paged inspection listing."""
    items: list[dict[str, Any]] = []
    while True:
        page = fetch(run_id, offset=len(items), limit=1000)["items"]
        items.extend(page)
        if len(page) < 1000:
            return items


@pytest.fixture
def fast_platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    platform = start_local_platform(tmp_path / "platform", samples_rate_limit=1_000_000, metrics_rate_limit=1_000_000)
    point_sdk_at(platform, monkeypatch, tmp_path)
    yield platform
    platform.stop()


@pytest.mark.slow
def test_an_outage_mid_run_costs_nothing_every_episode_lands_exactly_once(fast_platform: LocalPlatform) -> None:
    """20,000 episodes; a 30-second outage of the sample table and Prime Traces in the middle of the run."""
    total = 20_000
    run = po.init(name="outage", environments=["gsm8k"], model="m")
    for start in range(0, total // 2, 100):
        run.log_episodes([numbered_record(i) for i in range(start, start + 100)])
    for path in ("/api/v1/evaluations/*/samples", "/api/v1/traces"):
        fast_platform.inspect.add_fault(
            method="POST", path=path, action="fail_before", status=429, retry_after=0, times=None
        )
    ends = threading.Timer(30.0, fast_platform.inspect.clear_faults)
    ends.start()
    for start in range(total // 2, total, 100):
        run.log_episodes([numbered_record(i) for i in range(start, start + 100)])
        time.sleep(0.1)
    ends.join()
    report = run.finish()

    assert report is not None and report.complete, report.render()
    assert all(sink.delivered == total for sink in report.sinks)
    assert any(sink.replayed > 0 for sink in report.sinks)
    snapshot = fast_platform.inspect.run(run.id)
    assert snapshot["num_episodes"] == total
    assert snapshot["num_samples"] == total
    sample_ids = {row["sample_id"] for row in every(fast_platform.inspect.samples, run.id)}
    assert len(sample_ids) == total
    delivery = snapshot["summary"]["prime_runs"]["delivery"]
    assert delivery["eval_samples"]["possibly_missing"] == 0


def test_an_ambiguous_sample_failure_is_read_back_and_never_replayed(fast_platform: LocalPlatform) -> None:
    fast_platform.inspect.add_fault(
        method="POST", path="/api/v1/evaluations/*/samples", action="fail_after", status=502
    )
    run = po.init(environments=["gsm8k"], model="m")
    run.log_episodes([numbered_record(i) for i in range(3)])
    report = run.finish()
    assert report is not None
    samples = next(sink for sink in report.sinks if sink.sink == "eval_samples")
    assert samples.delivered == 3 and samples.possibly_missing == 0 and samples.replayed == 0 and samples.pending == 0
    assert fast_platform.inspect.run(run.id)["num_samples"] == 3  # stored once, by the request that "failed"
    assert fast_platform.inspect.run(run.id)["requests"]["POST /api/v1/evaluations/{evaluation_id}/samples"] == 1


_KILLED_PRODUCER = """
import copy, json, sys, time
import prime_otel as po
from tests._fixtures import numbered_record

run = po.init(name="killed", environments=["gsm8k"], model="m")
print(json.dumps({"id": run.id}), flush=True)
index = 0
while True:
    run.log_episodes([numbered_record(i) for i in range(index, index + 20)])
    index += 20
    print(json.dumps({"logged": index}), flush=True)
    time.sleep(0.05)
"""


def test_a_sigkilled_producer_leaves_a_spool_that_sync_delivers_completely_and_once(
    fast_platform: LocalPlatform, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    producer = subprocess.Popen([sys.executable, "-c", _KILLED_PRODUCER], env=env, stdout=subprocess.PIPE, text=True)
    assert producer.stdout is not None
    run_id = json.loads(producer.stdout.readline())["id"]
    fast_platform.inspect.add_fault(
        method="POST", path="/api/v1/evaluations/*/samples", action="delay", delay_s=0.5, times=None
    )
    while json.loads(producer.stdout.readline())["logged"] < 400:
        pass
    producer.send_signal(signal.SIGKILL)
    producer.wait(30)
    fast_platform.inspect.clear_faults()

    folder = tmp_path / "prime-runs" / run_id
    logged = {
        json.loads(line)["r"]["id"]
        for segment in (folder / "spool-records").glob("log-*.jsonl")
        for line in segment.read_text().splitlines()
        if line.endswith("}")
    }
    assert len(logged) >= 100
    command = [sys.executable, "-m", "prime_otel.cli", "sync", str(folder)]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode in (0, 2), first.stdout + first.stderr
    requests_before = sum(fast_platform.inspect.run(run_id)["requests"].values())
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert "nothing new" in second.stdout
    assert sum(fast_platform.inspect.run(run_id)["requests"].values()) == requests_before

    episodes = {episode["id"] for episode in every(fast_platform.inspect.episodes, run_id)}
    assert logged <= episodes  # Prime Traces: every logged episode, content-addressed so never twice
    rows = every(fast_platform.inspect.samples, run_id)
    row_ids = [row["sample_id"] for row in rows]
    assert len(row_ids) == len(set(row_ids))  # the sample table: never a duplicate
    ledger_file = folder / "spool-records" / "ledger.json"
    if ledger_file.exists():
        ledger = json.loads(ledger_file.read_text())["sinks"]["eval_samples"]
        missing = sum(stop - start for start, stop in ledger["missing"])
    else:
        missing = 0  # the sync delivered every record to every sink and removed the spool
    assert len(logged - set(row_ids)) <= missing  # whatever is absent was reported as possibly missing
