"""A training loop that outruns the platform: the uploader holds a bounded number of bytes of records, never the
whole backlog; past the bound the records wait in the spool (or the producer waits), and every one lands once."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

import prime_otel as po
from prime_otel.processors._uploader import DEFAULT_MAX_QUEUE_BYTES
from prime_otel.testing import LocalPlatform, start_local_platform
from tests._fixtures import episode_from_record, load_records
from tests._platform import point_sdk_at

TEAM = "team_abc"
STEPS = 40
PER_STEP = 16
# The first presigns answer slowly: the uploader is held for seconds while the loop makes a step in milliseconds.
SLOW_PRESIGNS = 4
PRESIGN_DELAY_S = 0.3
_RECORDS = load_records("train")
# A record's bytes as the bound counts them: its compact JSON.
RECORD_BYTES = min(len(json.dumps(record, separators=(",", ":"))) for record in _RECORDS)


@pytest.fixture
def slow_platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    platform = start_local_platform(
        tmp_path / "platform", teams=[TEAM], metrics_rate_limit=100_000, samples_rate_limit=100_000
    )
    point_sdk_at(platform, monkeypatch, tmp_path)
    monkeypatch.setenv("PRIME_TEAM_ID", TEAM)
    platform.inspect.add_fault(
        method="POST",
        path="/api/v1/rft/samples/presign",
        action="delay",
        delay_s=PRESIGN_DELAY_S,
        times=SLOW_PRESIGNS,
    )
    yield platform
    platform.stop()


def training_episode(step: int, index: int) -> Any:
    record = copy.deepcopy(_RECORDS[index % len(_RECORDS)])
    record["id"] = f"ep{step:05d}{index:05d}{os.getpid():08d}"
    for position, trace in enumerate(record["traces"]):
        trace["id"] = f"tr{step:05d}{index:05d}{position:03d}{os.getpid():08d}"
    record["run"]["work"]["step"] = step
    return episode_from_record(record)


def outrun_the_platform(spool: bool) -> tuple[po.Run, list[int], list[int], dict[int, list[str]]]:
    """Logs STEPS steps of fresh episodes as fast as they are made; after every call, what the records uploader
    holds (estimated bytes, records accepted and not delivered)."""
    run = po.init(kind="train", model="m", environments=["gsm8k"], sinks="legacy", samples_step_interval=1, spool=spool)
    processor = run._parts.processor
    assert processor is not None
    held, queued = [], []
    dispatched: dict[int, list[str]] = {}
    for step in range(1, STEPS + 1):
        batch = [training_episode(step, index) for index in range(PER_STEP)]
        dispatched[step] = [episode.id for episode in batch]
        run.log_episodes(batch)
        del batch
        held.append(processor.held_bytes)
        queued.append(processor.queued_records)
    return run, held, queued, dispatched


def assert_held_within_the_bound(held: list[int], queued: list[int]) -> None:
    # Waiting plus in flight: at most the bound each. The record count checks that the estimate is honest: the
    # loop logs far more than that (STEPS * PER_STEP records), so an unbounded queue would hold them all.
    assert max(held) <= 2 * DEFAULT_MAX_QUEUE_BYTES
    assert max(held) > DEFAULT_MAX_QUEUE_BYTES // 2, "the loop never reached the bound: the test proves nothing"
    most_records = 2 * DEFAULT_MAX_QUEUE_BYTES // RECORD_BYTES + 2 * PER_STEP
    assert most_records < STEPS * PER_STEP
    assert max(queued) <= most_records


def assert_every_step_stored_once(platform: LocalPlatform, run_id: str, dispatched: dict[int, list[str]]) -> None:
    steps = platform.inspect.steps(run_id)
    assert [entry["step"] for entry in steps] == list(range(1, STEPS + 1))
    for step, ids in dispatched.items():
        rows = platform.inspect.step_rows(run_id, step)["items"]
        assert sorted(json.loads(row["info"])["native_wrapper"]["id"] for row in rows) == sorted(ids)


def test_past_the_bound_a_step_waits_in_the_spool_not_in_memory_and_every_step_lands_once(
    slow_platform: LocalPlatform,
) -> None:
    run, held, queued, dispatched = outrun_the_platform(spool=True)
    report = run.finish()

    assert_held_within_the_bound(held, queued)
    assert report is not None and report.complete, report.render() if report else None
    samples = next(sink for sink in report.sinks if sink.sink == "rft_samples")
    assert samples.spooled > 0 and samples.replayed == samples.spooled
    assert samples.delivered == STEPS * PER_STEP and run.dropped_records == 0
    assert_every_step_stored_once(slow_platform, run.id, dispatched)


def test_without_a_spool_the_loop_waits_for_room_and_nothing_is_dropped(slow_platform: LocalPlatform) -> None:
    """Each slow request is far shorter than the producer's put timeout, so waiting loses nothing."""
    run, held, queued, dispatched = outrun_the_platform(spool=False)
    report = run.finish()

    assert_held_within_the_bound(held, queued)
    assert report is not None and report.complete, report.render() if report else None
    assert run.dropped_records == 0
    assert_every_step_stored_once(slow_platform, run.id, dispatched)
