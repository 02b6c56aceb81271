"""The training samples sink uploads each sampled step's episodes as one Parquet object (presign, PUT, confirm),
the rows the released SDK wrote; in a batch that mixes episodes with bare traces the traces are counted as
skipped, and a step off the sampling interval is left out without a request."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from prime_otel.client import ObjectStorage, PlatformHTTP, TrainingRunsAPI
from prime_otel.exporters.rft_samples import RftSamplesSink
from prime_otel.testing import LocalPlatform
from tests._fixtures import episode_from_record, load_episodes, load_json, load_records
from tests.exporters._platform_runs import open_training, spans

pytest.importorskip("pyarrow")

FIXTURE_ROWS: list[dict[str, Any]] = load_json("train", "step-10.parquet.rows.json")
FIXTURE_RUN_ID = "cmf0x7r2k000108l4a9b2c3d4"


def _comparable(rows: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """Rows without their wall-clock column, the run id put back to the fixture's."""
    return [
        {**row, "run_id": FIXTURE_RUN_ID if row["run_id"] == run_id else row["run_id"], "created_at": None}
        for row in rows
    ]


def _sink(http: PlatformHTTP, run_id: str, step_interval: int = 1) -> RftSamplesSink:
    return RftSamplesSink(TrainingRunsAPI(http), ObjectStorage(), run_id, step_interval=step_interval)


def test_a_mixed_batch_uploads_the_step_of_its_episodes_and_skips_the_bare_traces(
    platform: LocalPlatform, http: PlatformHTTP
) -> None:
    run_id = open_training(http)
    episodes = load_episodes("train")
    bare_trace = episodes[0].traces[0]
    sink = _sink(http, run_id)
    try:
        sink.write(spans([episodes[0], bare_trace, episodes[1], episodes[2], bare_trace]))
    finally:
        sink.close()

    assert (sink.stats.delivered, sink.stats.skipped, sink.steps_written) == (3, 2, 1)
    assert [step["step"] for step in platform.inspect.steps(run_id)] == [10]
    stored = platform.inspect.step_rows(run_id, 10)["items"]
    assert _comparable(stored, run_id) == _comparable(FIXTURE_ROWS, FIXTURE_RUN_ID)


def _at_step(record: dict[str, Any], step: int) -> Any:
    moved = copy.deepcopy(record)
    moved["run"]["work"]["step"] = step
    return episode_from_record(moved)


def test_a_step_off_the_sampling_interval_is_left_out_without_a_request(
    platform: LocalPlatform, http: PlatformHTTP
) -> None:
    run_id = open_training(http)
    record = load_records("train")[0]
    sink = _sink(http, run_id, step_interval=5)
    try:
        sink.write(spans([_at_step(record, 10), _at_step(record, 11), _at_step(record, 15)]))
    finally:
        sink.close()

    assert sink.sampled_out == 1
    assert [step["step"] for step in platform.inspect.steps(run_id)] == [10, 15]
    presigned = [
        r
        for r in platform.inspect.requests(limit=1000, run_id=run_id)
        if r["method"] == "POST" and "presign" in r["path"]
    ]
    assert len(presigned) == 2
