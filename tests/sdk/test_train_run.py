"""Training runs through prime_otel.init(kind="train") against the local platform (issue 4)."""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.run import _init
from prime_otel.testing import LocalPlatform, start_local_platform
from tests._fixtures import episode_from_record, load_records
from tests._platform import point_sdk_at

TEAM = "team_abc"
FAST_LIMITS = {"metrics_rate_limit": 100_000, "samples_rate_limit": 100_000}


@pytest.fixture
def train_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    platform = start_local_platform(tmp_path / "platform", teams=[TEAM], **FAST_LIMITS)
    point_sdk_at(platform, monkeypatch, tmp_path)
    monkeypatch.setenv("PRIME_TEAM_ID", TEAM)
    yield platform
    platform.stop()


_RECORDS = load_records("train")


def training_episode(step: int, index: int) -> Any:
    """A real verifiers training episode dispatched at ``step`` (ids unique per step and index)."""
    record = copy.deepcopy(_RECORDS[index % len(_RECORDS)])
    record["id"] = f"ep{step:05d}{index:05d}{os.getpid():08d}"
    for position, trace in enumerate(record["traces"]):
        trace["id"] = f"tr{step:05d}{index:05d}{position:03d}{os.getpid():08d}"
    record["run"]["work"]["step"] = step
    return episode_from_record(record)


def decoded_episode_ids(platform: LocalPlatform, run_id: str, step: int) -> list[str]:
    rows = platform.inspect.step_rows(run_id, step)["items"]
    import json

    return [json.loads(row["info"])["native_wrapper"]["id"] for row in rows]


def test_a_training_loop_gives_one_metrics_row_per_step_and_a_parquet_object_per_tenth_step(
    train_env: LocalPlatform,
) -> None:
    """60 steps x 16 episodes, metrics every step: one row per step, one object per tenth step, unique ids."""
    run = po.init(kind="train", name="loop", model="Qwen/Qwen3-8B", environments=["gsm8k"], sinks="legacy")
    dispatched: dict[int, list[str]] = {}
    for step in range(1, 61):
        batch = [training_episode(step, i) for i in range(16)]
        dispatched[step] = [episode.id for episode in batch]
        half = len(batch) // 2
        run.log_episodes(batch[:half])  # one step logged in two calls
        run.log_episodes(batch[half:])
        run.log_metrics({"loss": 1.0 / step, "reward": step / 60, "nan": float("nan")}, step=step)
    report = run.finish()

    assert report is not None and report.complete
    snapshot = train_env.inspect.run(run.id)
    assert snapshot["status"] == "COMPLETED"
    rows = snapshot["metric_rows"]
    assert [row["step"] for row in rows] == list(range(1, 61))
    assert all(row["nan"] is None and row["loss"] == pytest.approx(1.0 / row["step"]) for row in rows)
    steps = train_env.inspect.steps(run.id)
    assert [entry["step"] for entry in steps] == [10, 20, 30, 40, 50, 60]
    for step in (10, 20, 30, 40, 50, 60):
        assert sorted(decoded_episode_ids(train_env, run.id, step)) == sorted(dispatched[step])
        sample_ids = [row["sample_id"] for row in train_env.inspect.step_rows(run.id, step)["items"]]
        assert len(set(sample_ids)) == len(sample_ids) and max(sample_ids) < 2**53
    metrics_sink = next(sink for sink in report.sinks if sink.sink == "rft_metrics")
    posted = [r for r in train_env.inspect.requests(limit=1000, run_id=run.id) if r["path"].endswith("/rft/metrics")]
    assert metrics_sink.requests == len(posted) == 60
    assert metrics_sink.bytes == sum(int(r["headers"]["content-length"]) for r in posted)


def test_a_forked_child_logging_the_same_step_keeps_sample_ids_unique(train_env: LocalPlatform) -> None:
    """A forked child's objects number their sample ids in a band the parent never reaches."""
    run = po.init(kind="train", model="m", environments=["gsm8k"], sinks="legacy")
    run.log_episodes([training_episode(10, i) for i in range(4)])
    assert run.flush(30)
    pid = os.fork()
    if pid == 0:  # the child: log, drain, leave without running the parent's exit hooks
        code = 1
        try:
            run.log_episodes([training_episode(10, 100 + i) for i in range(4)])
            code = 0 if run.flush(30) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    run.log_episodes([training_episode(10, 200 + i) for i in range(4)])
    run.finish()

    rows = train_env.inspect.step_rows(run.id, 10)["items"]
    assert len(rows) == 12
    assert len({row["sample_id"] for row in rows}) == 12
    assert train_env.inspect.run(run.id)["status"] == "COMPLETED"
    assert train_env.inspect.run(run.id)["requests"].get("POST /api/v1/rft/finalize", 0) == 1


def test_an_rft_outage_pauses_the_sinks_then_everything_is_delivered_from_the_spool_once(
    train_env: LocalPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Training sinks pause instead of retiring (issue 6); what failed during the outage is
    kept in the spool and replayed after the pause, so every step's row and object lands exactly once."""
    monkeypatch.setattr(_init, "TRAINING_PAUSE_SECONDS", 1.0)
    run = po.init(kind="train", model="m", environments=["gsm8k"], sinks="legacy", samples_step_interval=1)
    train_env.inspect.add_fault(
        method="*", path="/api/v1/rft/*", action="fail_before", status=429, retry_after=0, times=None
    )
    for step in range(1, 4):
        run.log_episodes([training_episode(step, 0)])
        run.log_metrics({"loss": float(step)}, step=step)
        assert run.flush(60)
    assert run.report.sinks[0].pending == 3 and run.failed_records == {}
    train_env.inspect.clear_faults()
    time.sleep(1.2)
    for step in range(4, 7):
        run.log_episodes([training_episode(step, 0)])
        run.log_metrics({"loss": float(step)}, step=step)
    report = run.finish()

    assert report is not None and report.complete, report.render()
    snapshot = train_env.inspect.run(run.id)
    assert [row["step"] for row in snapshot["metric_rows"]] == [1, 2, 3, 4, 5, 6]
    assert [row["loss"] for row in snapshot["metric_rows"]] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert [entry["step"] for entry in train_env.inspect.steps(run.id)] == [1, 2, 3, 4, 5, 6]
    assert all(len(entry["objects"]) == 1 for entry in train_env.inspect.steps(run.id))
    assert {sink.sink: sink.replayed for sink in report.sinks} == {"rft_samples": 3, "rft_metrics": 3}


def test_a_team_outside_the_allowlist_gets_forbidden_from_init(train_env: LocalPlatform) -> None:
    """A 403 on create surfaces from ``init`` as ForbiddenError."""
    with pytest.raises(po.ForbiddenError):
        po.init(kind="train", model="m", environments=["gsm8k"], team_id="team_other")


def test_training_needs_a_model_and_a_team(train_env: LocalPlatform, monkeypatch: pytest.MonkeyPatch) -> None:
    """Creating a training run without a model or a team raises ConfigurationError."""
    with pytest.raises(po.ConfigurationError, match="model"):
        po.init(kind="train", environments=["gsm8k"])
    monkeypatch.delenv("PRIME_TEAM_ID")
    with pytest.raises(po.ConfigurationError, match="team"):
        po.init(kind="train", model="m", environments=["gsm8k"])


def test_attach_keeps_the_launchers_failure_marking_but_a_clean_finish_completes(train_env: LocalPlatform) -> None:
    """Attached runs make no request at init; they finalize on COMPLETED and leave other statuses alone."""
    owner = po.init(kind="train", model="m", environments=["gsm8k"])
    requests_before = len(train_env.inspect.requests(limit=10_000))
    attached = po.init(kind="train", id=owner.id)
    assert len(train_env.inspect.requests(limit=10_000)) == requests_before
    attached.fail(RuntimeError("trainer died"))
    assert train_env.inspect.run(owner.id)["status"] == "RUNNING"
    second = po.init(kind="train", id=owner.id)
    second.finish()
    assert train_env.inspect.run(owner.id)["status"] == "COMPLETED"
    owner.finish(status="failed", error="late")  # a 409: someone closed it first, not an error
    assert train_env.inspect.run(owner.id)["status"] == "COMPLETED"
    assert owner.errors == []


def test_a_hosted_runs_internal_root_is_accepted_with_its_token(train_env: LocalPlatform) -> None:
    """A hosted run's token travels as x-api-key; finalize and metrics go through /api/internal."""
    hosted = train_env.inspect.hosted_run("train", name="hosted")
    run = po.init(
        kind="train",
        id=hosted["id"],
        api_key=hosted["token"],
        base_url=f"{train_env.url}/api/internal/rft",
        traces_opt_out=True,
        sinks="legacy",
    )
    run.log_metrics({"loss": 0.5}, step=1)
    run.finish()
    snapshot = train_env.inspect.run(hosted["id"])
    assert snapshot["status"] == "COMPLETED"
    assert [row["step"] for row in snapshot["metric_rows"]] == [1]
    assert any(key.startswith("POST /api/internal/rft/finalize") for key in snapshot["requests"])


def test_finalize_is_replayed_after_an_ambiguous_failure(train_env: LocalPlatform) -> None:
    """/rft/finalize is compare-and-set, so the replay after fail_after succeeds once."""
    run = po.init(kind="train", model="m", environments=["gsm8k"])
    train_env.inspect.add_fault(method="POST", path="/api/v1/rft/finalize", action="fail_after", status=502)
    run.finish()
    snapshot = train_env.inspect.run(run.id)
    assert snapshot["status"] == "COMPLETED"
    assert snapshot["requests"]["POST /api/v1/rft/finalize"] == 2
    assert run.errors == []


def test_without_pyarrow_the_parquet_sink_turns_itself_off_and_traces_still_flow(
    train_env: LocalPlatform, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without pyarrow: one warning, nothing counted as lost, Prime Traces gets every episode."""
    from prime_otel.exporters import rft_samples

    monkeypatch.setattr(rft_samples, "parquet_available", lambda: False)
    run = po.init(kind="train", model="m", environments=["gsm8k"])
    run.log_episodes([training_episode(10, i) for i in range(3)])
    report = run.finish()
    assert report is not None and report.complete
    states = {sink.sink: sink.state for sink in report.sinks}
    assert states["rft_samples"] == "pyarrow is not installed"
    assert train_env.inspect.run(run.id)["num_episodes"] == 3
    assert train_env.inspect.steps(run.id) == []
    assert sum("pyarrow is not installed" in message for message in caplog.messages) == 1
