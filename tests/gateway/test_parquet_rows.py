"""The gateway builds training Parquet objects from the producers' v0 rows (it never holds episode objects): the
rows must give exactly the Parquet rows the in-process path gives for the same episodes."""

from __future__ import annotations

import io
import json
from typing import Any

import pyarrow.parquet as pq
import pytest

from prime_otel.exporters import _sample_rows as sample_rows
from prime_otel.projection import encode_samples, episodes_to_parquet_bytes, sample_rows_to_parquet_bytes
from tests._fixtures import TRAIN_RUN_ID, episode_from_record, load_episodes, load_records

NAN = float("nan")


def _decode(data: bytes | None) -> list[dict[str, Any]]:
    assert data is not None
    return [
        {key: value for key, value in row.items() if key != "created_at"}
        for row in pq.read_table(io.BytesIO(data)).to_pylist()
    ]


def _wire_rows(episodes: list[Any]) -> list[dict[str, Any]]:
    """The rows as the gateway gets them: projected by the producer, then through JSON."""
    return [json.loads(sample.data) for sample in encode_samples(episodes)]


def test_rows_give_the_same_parquet_rows_as_the_episodes() -> None:
    episodes = load_episodes("train")
    expected = _decode(episodes_to_parquet_bytes(episodes, TRAIN_RUN_ID, 10, sample_id_offset=2**32))
    actual = _decode(sample_rows_to_parquet_bytes(_wire_rows(episodes), TRAIN_RUN_ID, 10, sample_id_offset=2**32))
    assert actual == expected
    assert len(actual) == 3 and {row["env_name"] for row in actual} == {"gsm8k"}


def test_non_finite_advantage_and_rows_without_trajectory_match_too() -> None:
    """A NaN advantage is null in both; an empty trajectory is skipped but consumes its id."""
    records = load_records("train")
    records[0]["traces"][0]["info"]["advantage"] = NAN
    records[1]["traces"][0]["nodes"] = []
    records[1]["traces"][0]["calls"] = []
    episodes = [episode_from_record(record) for record in records]
    expected = _decode(episodes_to_parquet_bytes(episodes, "r", 10))
    assert _decode(sample_rows_to_parquet_bytes(_wire_rows(episodes), "r", 10)) == expected
    assert [row["sample_id"] for row in expected] == [0, 2]
    assert expected[0]["advantage"] is None


def test_an_oversize_episode_split_into_trace_rows_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    """An oversize episode's per-trace rows carry no native_wrapper; the summary's advantage and env apply."""
    record = load_records("eval")[2]  # two traces: solver + judge
    record["run"] = load_records("train")[0]["run"]
    record["traces"][1]["info"] = {"advantage": 0.25}
    episode = episode_from_record(record)
    monkeypatch.setattr(sample_rows, "MAX_SAMPLES_PAYLOAD_BYTES", 4000)
    expected = _decode(episodes_to_parquet_bytes([episode], "r", 10))
    rows = _wire_rows([episode])
    assert len(rows) == 2 and all("native_wrapper" not in (row["info"] or {}) for row in rows)
    actual = _decode(sample_rows_to_parquet_bytes(rows, "r", 10, env_names={episode.id: episode.env.id}))
    assert actual == expected


def test_no_rows_give_no_object() -> None:
    assert sample_rows_to_parquet_bytes([], "r", 10) is None
