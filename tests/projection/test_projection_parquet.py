"""The training viewer's Parquet object: its 19 columns, row rules, sample ids and non-finite values."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pyarrow.parquet as pq
import pytest

from prime_otel import projection
from prime_otel.exporters import _sample_rows as sample_rows
from prime_otel.projection import episodes_to_parquet_bytes, parquet_available
from tests._fixtures import TRAIN_RUN_ID, episode_from_record, fixture_path, load_json, load_records

NAN = float("nan")
INF = float("inf")


def _decode(data: bytes | None) -> list[dict[str, Any]]:
    assert data is not None
    return pq.read_table(io.BytesIO(data)).to_pylist()


def _without_created_at(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: value for key, value in row.items() if key != "created_at"} for row in rows]


def test_step_10_decodes_to_the_fixture_rows(train_episodes: list[Any]) -> None:
    """The three training episodes at step 10 give the uploaded rows (created_at aside)."""
    rows = _decode(episodes_to_parquet_bytes(train_episodes, TRAIN_RUN_ID, 10))
    assert _without_created_at(rows) == _without_created_at(load_json("train", "step-10.parquet.rows.json"))
    assert [row["sample_id"] for row in rows] == [0, 1, 2]
    assert [row["problem_id"] for row in rows] == [42, 42, 57]
    assert len({row["created_at"] for row in rows}) == 1  # one encode time for every row
    assert rows[0]["created_at"].tzinfo is not None


def test_schema_and_file_settings_match_the_uploaded_object(train_episodes: list[Any]) -> None:
    """Exactly the 19 columns and types; snappy, dictionary-encoded, with statistics."""
    data = episodes_to_parquet_bytes(train_episodes, TRAIN_RUN_ID, 10)
    assert data is not None
    parquet = pq.ParquetFile(io.BytesIO(data))
    schema = parquet.schema_arrow
    assert str(schema) == fixture_path("train", "parquet-schema.txt").read_text().strip()
    assert schema == pq.read_schema(fixture_path("train", "step-10.parquet"))
    assert len(schema) == 19
    group = parquet.metadata.row_group(0)
    for index in range(group.num_columns):
        column = group.column(index)
        assert column.compression == "SNAPPY"
        assert column.has_dictionary_page
        assert column.is_stats_set


def test_json_columns_use_default_json_style(train_episodes: list[Any]) -> None:
    """JSON columns use ", "/": " separators, non-ASCII escaped; the advantage is added to every branch."""
    record = load_records("train")[2]
    record["traces"][0]["task"]["data"]["prompt"] = "Über ☃"
    (row,) = _decode(episodes_to_parquet_bytes([episode_from_record(record)], "r", 10))
    assert '"prompt": "\\u00dcber \\u2603"' in row["task"]
    trajectory = json.loads(row["trajectory"])
    assert len(trajectory) >= 1
    assert all(branch["advantage"] == row["advantage"] for branch in trajectory)
    assert row["num_input_tokens"] == trajectory[-1]["num_input_tokens"]
    assert row["num_output_tokens"] == trajectory[-1]["num_output_tokens"]
    assert row["tag"] == row["prompt"] == row["answer"] == ""
    info = json.loads(row["info"])
    assert info["native_wrapper"]["id"] == record["id"] and info["native_trace_index"] == 0


def test_sample_ids_count_from_the_offset(train_episodes: list[Any]) -> None:
    """sample_id = range * 2^32 + row index."""
    offset = 3 * 2**32
    rows = _decode(episodes_to_parquet_bytes(train_episodes, TRAIN_RUN_ID, 20, sample_id_offset=offset))
    assert [row["sample_id"] for row in rows] == [offset, offset + 1, offset + 2]
    assert {row["step"] for row in rows} == {20}


def test_rows_without_a_trajectory_are_skipped_but_consume_their_id() -> None:
    """The empty-trajectory row is left out, its sample_id is not reused; no rows at all gives None."""
    records = load_records("train")
    empty = records[1]
    empty["traces"][0]["nodes"] = []
    empty["traces"][0]["calls"] = []
    traceless = load_records("train")[0]
    traceless["traces"] = []
    episodes = [episode_from_record(r) for r in (records[0], empty, traceless, records[2])]
    rows = _decode(episodes_to_parquet_bytes(episodes, "r", 10))
    assert [row["sample_id"] for row in rows] == [0, 2]
    assert episodes_to_parquet_bytes([episodes[1], episodes[2]], "r", 10) is None
    assert episodes_to_parquet_bytes([], "r", 10) is None


def test_problem_id_falls_back_to_the_sample_id() -> None:
    """No example index ⇒ problem_id = sample_id."""
    record = load_records("train")[0]
    record["traces"][0]["task"]["data"].pop("idx")
    (row,) = _decode(episodes_to_parquet_bytes([episode_from_record(record)], "r", 10, sample_id_offset=9))
    assert row["problem_id"] == row["sample_id"] == 9


def test_non_finite_values_become_null_and_the_row_survives() -> None:
    """Reward and JSON columns carry null; the advantage column is null too (improvement over 0.1.4)."""
    record = load_records("train")[0]
    trace = record["traces"][0]
    trace["rewards"] = {"correct": {"score": NAN, "weight": 1.0}}
    trace["metrics"] = {"num_turns": INF}
    trace["info"]["advantage"] = NAN
    trace["timing"]["start"] = -INF
    (row,) = _decode(episodes_to_parquet_bytes([episode_from_record(record)], "r", 10))
    assert row["reward"] is None
    assert row["advantage"] is None
    assert json.loads(row["metrics"]) == {"num_turns": None}
    assert json.loads(row["timing"])["start"] is None
    assert all(branch["advantage"] is None for branch in json.loads(row["trajectory"]))
    info = json.loads(row["info"])
    assert info["advantage"] is None
    assert info["native_wrapper"]["traces"][0]["rewards"]["correct"]["score"] is None


def test_an_oversize_episode_falls_back_to_rows_per_trace(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The oversize-episode fallback to one row per trace applies to the Parquet rows as to the v0 rows."""
    record = load_records("eval")[2]  # two traces: solver + judge
    record["run"] = load_records("train")[0]["run"]
    episode = episode_from_record(record)
    whole = _decode(episodes_to_parquet_bytes([episode], "r", 10))
    assert len(whole) == 1
    monkeypatch.setattr(sample_rows, "MAX_SAMPLES_PAYLOAD_BYTES", 4000)
    with caplog.at_level(logging.WARNING, logger="prime_otel.projection"):
        rows = _decode(episodes_to_parquet_bytes([episode], "r", 10))
    assert [json.loads(row["info"]) for row in rows] == [trace.info or None for trace in episode.traces]
    assert [json.loads(row["task"])["idx"] for row in rows] == [3, 3]
    assert [row["sample_id"] for row in rows] == [0, 1]
    assert episode.id in caplog.text


def test_parquet_is_available_with_pyarrow_installed() -> None:
    assert parquet_available() is True


def test_a_row_at_the_limit_exactly_stays_whole(train_episodes: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The Parquet path decides the fallback on the exact compact v0 size, as the v0 path does."""
    (sample,) = projection.encode_samples(train_episodes[:1])
    monkeypatch.setattr(sample_rows, "MAX_SAMPLES_PAYLOAD_BYTES", projection.ENVELOPE_BYTES + len(sample.data))
    assert len(_decode(episodes_to_parquet_bytes(train_episodes[:1], "r", 10))) == 1
