"""Differential tests against the released prime-runs 0.1.4 on the fixtures: same output, except for the
improvements documented in prime_otel.projection and prime_otel.metrics."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pyarrow.parquet as pq
import pytest
from prime_runs import metrics as released_metrics
from prime_runs import projection as released
from prime_runs.run import _clean_metrics
from prime_runs.sinks.base import is_episode as released_is_episode
from prime_runs.sinks.base import stamp_run as released_stamp_run

from prime_otel import metrics, projection
from prime_otel.exporters import _sample_rows as sample_rows
from prime_otel.records import clean, is_episode, nullify, stamp_run
from tests._fixtures import EVAL_RUN_ID, TRAIN_RUN_ID, Kind, episode_from_record, load_records

NAN = float("nan")
INF = float("inf")


def _episodes(kind: Kind, eval_episodes: list[Any], train_episodes: list[Any]) -> list[Any]:
    return eval_episodes if kind == "eval" else train_episodes


def _parquet_rows(data: bytes | None) -> list[dict[str, Any]]:
    assert data is not None
    rows = pq.read_table(io.BytesIO(data)).to_pylist()
    for row in rows:
        row.pop("created_at")
    return rows


@pytest.mark.parametrize("kind", ["eval", "train"])
def test_samples_match_released(kind: Kind, eval_episodes: list[Any], train_episodes: list[Any]) -> None:
    episodes = _episodes(kind, eval_episodes, train_episodes)
    ours_numbers: dict[Any, int] = {}
    theirs_numbers: dict[Any, int] = {}
    for _ in range(2):  # the second call continues the numbering
        ours = projection.build_samples(episodes, ours_numbers)
        theirs = released.build_samples(episodes, theirs_numbers)
        assert json.dumps(ours) == json.dumps(theirs)
    assert ours_numbers == theirs_numbers
    for trace in (trace for episode in episodes for trace in episode.traces):
        assert projection.trace_to_sample(trace, 4, "e") == released.trace_to_sample(trace, 4, "e")
    assert [projection.summary_trace_index(e) for e in episodes] == [released.summary_trace_index(e) for e in episodes]


def test_rows_with_non_finite_values_match_released() -> None:
    record = load_records("eval")[0]
    trace = record["traces"][0]
    trace["rewards"] = {"correct": {"score": NAN, "weight": 1.0}, "reward": {"score": 0.5, "weight": 1.0}}
    trace["metrics"] = {"num_turns": INF}
    trace["timing"]["start"] = NAN
    trace["info"] = {"advantage": -INF, "pair": (1, NAN)}
    episode = episode_from_record(record)
    assert json.dumps(projection.build_samples([episode])) == json.dumps(released.build_samples([episode]))


def test_oversize_fallback_matches_released(eval_episodes: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sample_rows, "MAX_SAMPLES_PAYLOAD_BYTES", 4000)
    monkeypatch.setattr(released, "MAX_SAMPLES_PAYLOAD_BYTES", 4000)
    ours = projection.build_samples(eval_episodes)
    assert len(ours) > len(eval_episodes)
    assert ours == released.build_samples(eval_episodes)


def test_packing_matches_released(eval_episodes: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    rows = projection.build_samples(eval_episodes * 4)
    sizes = [len(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode()) for row in rows]
    for limit in (max(sizes) + 14, sizes[0] + sizes[1] + 15, sizes[0] + sizes[1] + 16, sum(sizes) + 100):
        monkeypatch.setattr(sample_rows, "MAX_SAMPLES_PAYLOAD_BYTES", limit)
        monkeypatch.setattr(released, "MAX_SAMPLES_PAYLOAD_BYTES", limit)
        assert projection.batch_samples(rows) == released.batch_samples(rows)
    monkeypatch.setattr(sample_rows, "MAX_SAMPLES_PAYLOAD_BYTES", max(sizes) + 13)
    monkeypatch.setattr(released, "MAX_SAMPLES_PAYLOAD_BYTES", max(sizes) + 13)
    with pytest.raises(ValueError):
        released.batch_samples(rows)
    with pytest.raises(ValueError):
        projection.batch_samples(rows)


def test_parquet_matches_released(train_episodes: list[Any]) -> None:
    for offset in (0, 2**32):
        ours = projection.episodes_to_parquet_bytes(train_episodes, TRAIN_RUN_ID, 10, sample_id_offset=offset)
        theirs = released.episodes_to_parquet_bytes(train_episodes, TRAIN_RUN_ID, 10, sample_id_offset=offset)
        assert _parquet_rows(ours) == _parquet_rows(theirs)
        assert pq.read_schema(io.BytesIO(ours)) == pq.read_schema(io.BytesIO(theirs))  # type: ignore[arg-type]
    assert projection.episodes_to_parquet_bytes([], "r", 1) is released.episodes_to_parquet_bytes([], "r", 1)


def test_parquet_differs_from_released_only_in_the_non_finite_advantage() -> None:
    """Documented improvement 1: 0.1.4 writes a NaN advantage into the float column; we write null."""
    record = load_records("train")[0]
    record["traces"][0]["info"]["advantage"] = NAN
    record["traces"][0]["metrics"] = {"num_turns": INF}
    episode = episode_from_record(record)
    (ours,) = _parquet_rows(projection.episodes_to_parquet_bytes([episode], "r", 10))
    (theirs,) = _parquet_rows(released.episodes_to_parquet_bytes([episode], "r", 10))
    assert ours["advantage"] is None and math.isnan(theirs["advantage"])
    ours.pop("advantage")
    theirs.pop("advantage")
    assert ours == theirs


@pytest.mark.parametrize("kind", ["eval", "train"])
def test_summary_matches_released(kind: Kind, eval_episodes: list[Any], train_episodes: list[Any]) -> None:
    episodes = _episodes(kind, eval_episodes, train_episodes)
    assert metrics.from_episodes(episodes) == released_metrics.from_episodes(episodes)
    some = [trace for episode in episodes for trace in episode.traces][1:]
    assert metrics.from_episodes(episodes, some) == released_metrics.from_episodes(episodes, some)


@pytest.mark.parametrize("kind", ["eval", "train"])
def test_stamping_matches_released(kind: Kind) -> None:
    run_id = EVAL_RUN_ID if kind == "eval" else TRAIN_RUN_ID
    extra: list[dict[str, Any]] = [
        {"id": "t", "traces": [{"run": {"name": "own"}}, 3]},
        {"id": "bare"},
        {"traces": ({"a": 1},)},
    ]
    for record in [*load_records(kind), *extra]:
        for target in ("eval", "train"):
            ours = stamp_run(record, run_id, target)
            theirs = released_stamp_run(record, run_id, target)
            assert json.dumps(ours) == json.dumps(theirs)
        assert is_episode(record) == released_is_episode(record)


@pytest.mark.parametrize(
    "values",
    [
        {"loss": 0.5, "nan": NAN, "nested": {"a": INF, "b": {"c": NAN}}, "l": [1.0, NAN, {}, (2.0, INF)]},
        {"empty": {}, "s": "x", "n": None, "deep": {"x": {"y": {}}}},
    ],
)
def test_clean_and_nullify_match_released(values: dict[str, Any]) -> None:
    assert clean(values) == _clean_metrics(values)
    assert nullify(values) == released._nullify_non_finite(values)
