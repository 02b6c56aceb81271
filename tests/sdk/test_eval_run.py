"""An eval run through prime_otel.init() against the local platform over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform
from tests._fixtures import load_episodes

FIXTURES = Path(__file__).parent.parent / "fixtures"
CONFIG_TEXT = '[eval]\nenvironment = "gsm8k"\nrollouts_per_example = 1\n'


def _fixture_samples() -> list[dict[str, Any]]:
    return json.loads((FIXTURES / "eval" / "samples.json").read_text())["samples"]  # type: ignore[no-any-return]


def _stamped(index: int, run_id: str) -> dict[str, Any]:
    text = (FIXTURES / "eval" / f"episode-{index}.stamped.json").read_text()
    return json.loads(text.replace("eval-3f9c2a71d4", run_id))  # type: ignore[no-any-return]


def test_dual_sinks_land_fixture_rows_and_stamped_episodes_exactly_once(
    platform_env: LocalPlatform, tmp_path: Path
) -> None:
    """Both tables hold what the fixtures hold (the platform id replaces the producer's); the summary counts them."""
    config = tmp_path / "eval.toml"
    config.write_text(CONFIG_TEXT)
    episodes = load_episodes("eval")
    run = po.init(
        name="fixture-eval", environments=["gsm8k"], model="Qwen/Qwen3-8B", framework="verifiers", config=config
    )
    run.log_episodes(episodes)
    report = run.finish(summary=po.metrics.from_episodes(episodes))

    assert report is not None and report.complete
    snapshot = platform_env.inspect.run(run.id)
    assert snapshot["status"] in ("PROCESSING", "COMPLETED")
    assert snapshot["config_source"]["text"] == CONFIG_TEXT
    assert platform_env.inspect.samples(run.id)["items"] == _fixture_samples()
    landed = platform_env.inspect.episodes(run.id)["items"]
    assert sorted(landed, key=lambda e: e["id"]) == sorted(
        (_stamped(i, run.id) for i in (1, 2, 3)), key=lambda e: e["id"]
    )
    summary = snapshot["summary"]
    assert summary["prime_runs"]["traces_episodes_written"] == 3
    assert summary["avg_reward"] == pytest.approx(2 / 3)


def test_traces_disabled_retires_that_sink_quietly_and_the_legacy_table_stays_complete(
    platform_env: LocalPlatform,
) -> None:
    """Outside the traces beta nothing is lost and nothing raises, even under on_error='raise'."""
    platform_env.inspect.settings(traces="disabled")
    episodes = load_episodes("eval")
    run = po.init(environments=["gsm8k"], model="m", on_error="raise")
    run.log_episodes(episodes)
    report = run.finish()
    assert report is not None
    assert run.failed_records == {}
    assert platform_env.inspect.run(run.id)["num_samples"] == 3
    states = {sink.sink: sink.state for sink in report.sinks}
    assert states["traces"] == "not enabled for this account"


def test_traces_policy_falls_back_to_the_legacy_table_only_when_traces_are_not_enabled(
    platform_env: LocalPlatform,
) -> None:
    """Exclusive routing writes the legacy table only after service_not_enabled."""
    episodes = load_episodes("eval")
    run = po.init(environments=["gsm8k"], model="m", sinks="traces")
    run.log_episodes(episodes)
    run.finish()
    assert platform_env.inspect.run(run.id)["num_samples"] == 0
    assert platform_env.inspect.run(run.id)["num_episodes"] == 3

    platform_env.inspect.settings(traces="disabled")
    fallback = po.init(environments=["gsm8k"], model="m", sinks="traces")
    fallback.log_episodes(episodes)
    fallback.finish()
    assert platform_env.inspect.run(fallback.id)["num_samples"] == 3


def test_an_ambiguous_failure_on_create_gives_one_evaluation_or_a_clear_error(platform_env: LocalPlatform) -> None:
    """The create POST is never replayed after a 502 that followed the work."""
    platform_env.inspect.add_fault(method="POST", path="/api/v1/evaluations/", action="fail_after", status=502)
    before = len(platform_env.inspect.runs())
    with pytest.raises(po.RetryableAPIError):
        po.init(environments=["gsm8k"], model="m")
    assert len(platform_env.inspect.runs()) == before + 1


def test_an_ambiguous_failure_on_samples_is_read_back_and_the_rows_stored_once_count_delivered(
    platform_env: LocalPlatform,
) -> None:
    """The samples POST is never sent again blindly after a 502: the rows are read back, found, and counted
    delivered; they appear once."""
    platform_env.inspect.add_fault(method="POST", path="/api/v1/evaluations/*/samples", action="fail_after", status=502)
    episodes = load_episodes("eval")
    run = po.init(environments=["gsm8k"], model="m")
    run.log_episodes(episodes)
    report = run.finish()
    assert run.failed_records == {} and report is not None and report.complete
    rows = platform_env.inspect.samples(run.id)["items"]
    assert len(rows) == 3 and len({row["sample_id"] for row in rows}) == 3
    assert platform_env.inspect.run(run.id)["requests"]["POST /api/v1/evaluations/{evaluation_id}/samples"] == 1
    assert platform_env.inspect.run(run.id)["num_episodes"] == 3


def test_a_rate_limit_is_waited_out_and_nothing_is_lost(platform_env: LocalPlatform) -> None:
    platform_env.inspect.add_fault(
        method="POST", path="/api/v1/evaluations/*/samples", action="rate_limit", retry_after=1, times=2
    )
    run = po.init(environments=["gsm8k"], model="m")
    run.log_episodes(load_episodes("eval"))
    report = run.finish()
    assert report is not None and report.complete
    assert platform_env.inspect.run(run.id)["num_samples"] == 3


def test_three_transient_failures_pause_the_samples_sink_and_the_rows_stay_spooled(platform_env: LocalPlatform) -> None:
    """Every answer is a 503: the rows are read back, proven not stored, and kept in the spool (not possibly
    missing); the sink pauses after three failures in a row. Rows left in the spool at finish are not on the
    platform, so the prime-runs loss counter counts them."""
    platform_env.inspect.add_fault(
        method="POST", path="/api/v1/evaluations/*/samples", action="fail_before", status=503, times=None
    )
    episodes = load_episodes("eval")
    run = po.init(environments=["gsm8k"], model="m")
    for episode in episodes:
        run.log_episodes([episode])
        assert run.flush(30)
    report = run.finish()
    assert report is not None
    samples = next(sink for sink in report.sinks if sink.sink == "eval_samples")
    assert (samples.delivered, samples.possibly_missing, samples.pending) == (0, 0, 3)
    assert run.failed_records == {"eval_samples": 3} and not report.complete
    assert any("eval_samples" in error for error in run.errors)
    assert platform_env.inspect.run(run.id)["num_episodes"] == 3


_DOWN_AT_FINISH_PRODUCER = """
import json, sys
import prime_otel as po
from tests._fixtures import load_episodes

episodes = load_episodes("eval")
run = po.init(environments=["gsm8k"], model="m")
print(json.dumps({"id": run.id}), flush=True)
sys.stdin.readline()  # the test stops the platform now
run.log_episodes(episodes)
report = run.finish(timeout=3)
print(json.dumps({"pending": [sink.pending for sink in report.sinks], "complete": report.complete}), flush=True)
"""


def test_a_platform_that_is_down_at_finish_keeps_the_records_for_a_later_sync(
    platform_env: LocalPlatform, tmp_path: Path
) -> None:
    """A bounded finish; what could not be sent stays in the run's spool and `prime-otel sync` delivers it once,
    after the producer is gone (issue 6)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    producer = subprocess.Popen(
        [sys.executable, "-c", _DOWN_AT_FINISH_PRODUCER],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert producer.stdin is not None and producer.stdout is not None
    run_id = json.loads(producer.stdout.readline())["id"]
    platform_env.stop()
    producer.stdin.write("go\n")
    producer.stdin.flush()
    outcome = json.loads(producer.stdout.readline())
    assert producer.wait(60) == 0
    assert outcome == {"pending": [3, 3], "complete": False}

    platform_env.restart()
    command = [sys.executable, "-m", "prime_otel.cli", "sync", str(tmp_path / "prime-runs" / run_id)]
    for _ in range(2):  # a second sync finds nothing left to send
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
    snapshot = platform_env.inspect.run(run_id)
    assert snapshot["num_samples"] == 3 and snapshot["num_episodes"] == 3
    assert snapshot["status"] in ("PROCESSING", "COMPLETED")
