"""Episode records (JSON mappings, ``Episode.to_record()``) get exactly the v0 rows and Parquet rows their verifiers
objects get: a differential test over the fixtures and a few hundred
seeded random episodes, plus the mapping-only rules (ready rows, malformed records)."""

from __future__ import annotations

import copy
import io
import json
import logging
from collections.abc import Sequence
from typing import Any

import pyarrow.parquet as pq
import pytest

from prime_otel import projection
from prime_otel.exporters import _sample_rows as sample_rows
from prime_otel.projection import (
    build_samples,
    encode_samples,
    episodes_to_parquet_bytes,
    sample_rows_to_parquet_bytes,
    summary_trace,
    summary_trace_index,
    trace_to_sample,
)
from prime_otel.records import EncodedRecord, compact_json
from tests._fixtures import TRAIN_RUN_ID, Kind, episode_from_record, load_json, load_records
from tests.projection._episode_gen import EpisodeGenerator

CASES = 300
CHUNK = 25
# Small enough that most multi-trace generated episodes take the one-row-per-trace fallback for oversize episodes.
TIGHT_LIMIT = 6000


@pytest.fixture(scope="module")
def generated() -> list[tuple[Any, dict[str, Any]]]:
    """(verifiers episode, its ``to_record()``) for each seeded random record; tests must not edit them."""
    generator = EpisodeGenerator(seed=20240611)
    pairs = []
    for _ in range(CASES):
        episode = episode_from_record(generator.record())
        pairs.append((episode, episode.to_record()))
    return pairs


def _data(samples: Sequence[projection.EncodedSample]) -> list[bytes]:
    return [sample.data for sample in samples]


def _decode(data: bytes | None) -> list[dict[str, Any]]:
    if data is None:
        return []
    return [{k: v for k, v in row.items() if k != "created_at"} for row in pq.read_table(io.BytesIO(data)).to_pylist()]


def _chunks(pairs: list[tuple[Any, dict[str, Any]]]) -> list[list[tuple[Any, dict[str, Any]]]]:
    return [pairs[start : start + CHUNK] for start in range(0, len(pairs), CHUNK)]


# --- v0 rows ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["eval", "train"])
def test_fixture_records_give_the_rows_of_their_objects(kind: Kind) -> None:
    records = load_records(kind)
    episodes = [episode_from_record(copy.deepcopy(record)) for record in records]
    from_records = encode_samples(records)
    assert _data(from_records) == _data(encode_samples(episodes))
    assert [sample.data for sample in from_records] == [compact_json(sample.row) for sample in from_records]
    assert [sample.row for sample in from_records] == load_json(kind, "samples.json")["samples"]


def test_generated_records_give_the_rows_of_their_objects(generated: list[tuple[Any, dict[str, Any]]]) -> None:
    """Byte for byte, rollout numbering across the batch included; also for the record after a JSON round trip
    (what the OTLP gateway and offline sync hold) and for objects and records mixed in one call."""
    episodes = [episode for episode, _ in generated]
    records = [record for _, record in generated]
    expected = _data(encode_samples(episodes))
    assert len(expected) > CASES * 0.8
    assert _data(encode_samples(records)) == expected
    assert _data(encode_samples([json.loads(json.dumps(record)) for record in records])) == expected
    mixed = [record if position % 2 else episode for position, (episode, record) in enumerate(generated)]
    assert _data(encode_samples(mixed)) == expected


def test_generated_oversize_records_fall_back_like_their_objects(
    generated: list[tuple[Any, dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An oversize episode record takes the same one-row-per-trace fallback, in the same cases, with the same rows."""
    monkeypatch.setattr(sample_rows, "MAX_SAMPLES_PAYLOAD_BYTES", TIGHT_LIMIT)
    episodes = [episode for episode, _ in generated]
    expected = encode_samples(episodes)
    assert sum("native_wrapper" not in (sample.row["info"] or {}) for sample in expected) > 20
    from_records = encode_samples([record for _, record in generated])
    assert _data(from_records) == _data(expected)
    assert [sample.source for sample in from_records] == [sample.source for sample in expected]


def test_member_traces_and_summary_choice_match_the_objects(generated: list[tuple[Any, dict[str, Any]]]) -> None:
    for episode, record in generated:
        assert summary_trace_index(record) == summary_trace_index(episode)
        summary = summary_trace(record)
        assert (summary is None) == (summary_trace(episode) is None)
        for trace, trace_record in zip(episode.traces, record["traces"], strict=True):
            assert compact_json(trace_to_sample(trace_record, 2, "e")) == compact_json(trace_to_sample(trace, 2, "e"))


def test_a_given_encoded_record_is_shared_as_for_objects(generated: list[tuple[Any, dict[str, Any]]]) -> None:
    records = [record for _, record in generated[:40]]
    encoded = [EncodedRecord(record) for record in records]
    assert _data(encode_samples(records, records=encoded)) == _data(encode_samples(records))


def test_a_ready_v0_row_passes_through_between_episodes(eval_episodes: list[Any]) -> None:
    """A mapping with ``sample_id`` is a finished row: encoded as it is (non-finite values nulled), numbered
    nothing, keeping its input position."""
    record = load_records("eval")[0]
    ready = {**build_samples(eval_episodes[1:2])[0], "reward": float("nan")}
    samples = encode_samples([record, ready, eval_episodes[2]])
    assert [sample.source for sample in samples] == [0, 1, 2]
    assert samples[1].data == compact_json({**ready, "reward": None})
    assert _data([samples[0], samples[2]]) == _data(encode_samples([eval_episodes[0], eval_episodes[2]]))


def test_a_mapping_that_is_neither_an_episode_nor_a_row_is_refused() -> None:
    bare_trace = load_records("eval")[0]["traces"][0]
    with pytest.raises(TypeError):
        encode_samples([bare_trace])
    with pytest.raises(TypeError):
        episodes_to_parquet_bytes([bare_trace], "r", 10)


def test_a_parent_cycle_is_refused_instead_of_hanging_the_uploader() -> None:
    record = load_records("train")[2]
    nodes = record["traces"][0]["nodes"]
    nodes[0]["parent"] = len(nodes) - 2  # the last node stays a leaf; its walk enters the loop
    with pytest.raises(ValueError, match="cycle"):
        encode_samples([record])


def test_a_hand_made_record_projects_as_verifiers_reads_it() -> None:
    """A producer not using verifiers may write nulls verifiers would omit from task data, integer scores and no
    agent name: the row is the one of the validated object."""
    record = load_records("eval")[0]
    trace = record["traces"][0]
    trace["task"]["data"].update(id=None, image=None)
    trace["rewards"] = {"correct": {"score": 1}, "format": {"score": 0, "weight": 2}}
    del trace["agent"]["name"], trace["agent"]["trainable"]
    (row,) = build_samples([record])
    (expected,) = build_samples([episode_from_record(copy.deepcopy(record))])
    assert {k: v for k, v in row.items() if k != "info"} == {k: v for k, v in expected.items() if k != "info"}
    assert json.dumps(row["reward"]) == "1.0"
    assert (row["agent"], row["trainable"]) == ("agent", True)
    assert "id" not in row["task"]


# --- Parquet ---------------------------------------------------------------------------------------------------


def test_fixture_training_records_give_the_uploaded_parquet_rows() -> None:
    """The three training records give the fixture's Parquet rows, as their objects do."""
    records = load_records("train")
    expected = _decode_fixture()
    assert _decode(episodes_to_parquet_bytes(records, TRAIN_RUN_ID, 10)) == expected
    assert _decode(sample_rows_to_parquet_bytes(build_samples(records), TRAIN_RUN_ID, 10)) == expected


def _decode_fixture() -> list[dict[str, Any]]:
    rows = load_json("train", "step-10.parquet.rows.json")
    return [{k: v for k, v in row.items() if k != "created_at"} for row in rows]


@pytest.mark.parametrize("limit", [None, TIGHT_LIMIT])
def test_generated_parquet_from_records_and_from_rows_equals_parquet_from_objects(
    generated: list[tuple[Any, dict[str, Any]]],
    limit: int | None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Per chunk of episodes (sample ids numbered across it): the records give the objects' table, and so do the
    records' v0 rows through :func:`sample_rows_to_parquet_bytes` (fallback rows naming their environment)."""
    if limit is not None:
        monkeypatch.setattr(sample_rows, "MAX_SAMPLES_PAYLOAD_BYTES", limit)
    caplog.set_level(logging.ERROR, logger="prime_otel.projection")
    compared = 0
    for chunk in _chunks(generated):
        episodes = [episode for episode, _ in chunk]
        records = [record for _, record in chunk]
        expected = _decode(episodes_to_parquet_bytes(episodes, "run-1", 10, sample_id_offset=7))
        compared += len(expected)
        assert _decode(episodes_to_parquet_bytes(records, "run-1", 10, sample_id_offset=7)) == expected
        env_names = {record["id"]: record.get("env", {}).get("id", "") for record in records}
        from_rows = sample_rows_to_parquet_bytes(
            build_samples(records), "run-1", 10, sample_id_offset=7, env_names=env_names
        )
        assert _decode(from_rows) == expected
    assert compared > CASES * 0.7
