"""v0 sample rows and their packing into requests of at most 25 MiB, on real verifiers episodes."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from prime_otel.exporters import _sample_rows as sample_rows
from prime_otel.projection import (
    ENVELOPE_BYTES,
    MAX_SAMPLES_PAYLOAD_BYTES,
    EncodedSample,
    batch_samples,
    build_samples,
    encode_episode_samples,
    encode_samples,
    episode_to_samples,
    pack_sample_requests,
    summary_trace,
    summary_trace_index,
    trace_to_sample,
)
from prime_otel.records import EncodedRecord, compact_json
from tests._fixtures import episode_from_record, load_json, load_records

V0_KEYS = [
    "sample_id",
    "example_id",
    "rollout_number",
    "episode_id",
    "agent",
    "trainable",
    "task",
    "prompt",
    "completion",
    "answer",
    "tool_defs",
    "reward",
    "timing",
    "is_completed",
    "is_truncated",
    "metrics",
    "error",
    "stop_condition",
    "trajectory",
    "token_usage",
    "info",
]
NAN = float("nan")
INF = float("inf")


class CountingEpisode:
    """A duck-typed episode around a verifiers one, counting ``to_record()`` calls."""

    def __init__(self, episode: Any) -> None:
        self._episode = episode
        self.to_record_calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._episode, name)

    def to_record(self) -> dict[str, Any]:
        self.to_record_calls += 1
        return self._episode.to_record()


# --- fixture equality ------------------------------------------------------------------------------------------


def test_eval_rows_equal_the_uploaded_samples_body(eval_episodes: list[Any]) -> None:
    """The exact body 0.1.4 posted for the three eval episodes (JSON types included: reward 0)."""
    expected = load_json("eval", "samples.json")
    rows = build_samples(eval_episodes)
    assert rows == expected["samples"]
    assert json.dumps(rows) == json.dumps(expected["samples"])
    (request,) = pack_sample_requests(encode_samples(eval_episodes))
    assert json.loads(request.body) == expected
    assert request.body == compact_json(expected)


def test_train_rows_equal_the_fixture_projection(train_episodes: list[Any]) -> None:
    expected = load_json("train", "samples.json")["samples"]
    assert json.dumps(build_samples(train_episodes)) == json.dumps(expected)


def test_row_keys_follow_the_contract_order_then_sub_rewards(eval_episodes: list[Any]) -> None:
    """Row keys come in the v0 column order, then one top-level key per non-None sub-reward."""
    first, second, third = build_samples(eval_episodes)
    assert list(first) == [*V0_KEYS, "correct"]
    assert list(second) == V0_KEYS  # rewards {"correct": null}: no sub-reward column
    assert list(third) == [*V0_KEYS, "judge"]
    assert first["prompt"] == [] and first["answer"] == "72"


def test_episode_row_is_keyed_by_the_episode_and_wraps_the_unstamped_record(eval_episodes: list[Any]) -> None:
    """The row's ``native_wrapper`` is the producer's record as it was, not the stamped copy."""
    records = load_records("eval")
    for episode, record, row in zip(eval_episodes, records, build_samples(eval_episodes), strict=True):
        assert row["sample_id"] == row["episode_id"] == episode.id
        assert row["info"]["native_wrapper"] == record
        assert row["info"]["native_trace_index"] == 0
        assert "run" not in row["info"]["native_wrapper"]["traces"][0]


def test_trace_to_sample_projects_the_last_branch_and_every_branch(train_episodes: list[Any]) -> None:
    """completion = final branch's messages (system/user included); trajectory = one entry per branch."""
    trace = train_episodes[2].traces[0]
    row = trace_to_sample(trace)
    assert row["sample_id"] == trace.id and row["rollout_number"] == 1 and row["episode_id"] is None
    branches = trace.branches
    assert [entry["num_input_tokens"] for entry in row["trajectory"]] == [b.num_input_tokens for b in branches]
    last = [message.model_dump(mode="json", exclude_none=True) for message in branches[-1].messages]
    assert row["completion"] == last == row["trajectory"][-1]["messages"]
    assert [message["role"] for message in row["completion"]][:2] == ["system", "user"]
    assert row["info"] == {"advantage": trace.info["advantage"]}


# --- summary trace and numbering -------------------------------------------------------------------------------


def test_summary_trace_is_the_first_trainable_else_the_first() -> None:
    """The summary trace is the first trainable one: a judge listed first does not represent the episode."""
    record = load_records("eval")[2]
    record["traces"].reverse()  # judge first, then solver
    episode = episode_from_record(record)
    assert [trace.agent.name for trace in episode.traces] == ["judge", "solver"]
    assert summary_trace_index(episode) == 1 and summary_trace(episode).agent.name == "solver"
    (row,) = build_samples([episode])
    assert row["agent"] == "solver" and row["info"]["native_trace_index"] == 1

    for trace in record["traces"]:
        trace["agent"]["trainable"] = False
    frozen = episode_from_record(record)
    assert summary_trace_index(frozen) == 0
    assert build_samples([frozen])[0]["agent"] == "judge"


def test_rollouts_are_numbered_per_example_across_streaming_calls(eval_episodes: list[Any]) -> None:
    """Numbering is keyed by the summary task's idx, starts at 1, persists across calls; no row without traces."""
    record = load_records("eval")[0]
    record["traces"] = []
    traceless = episode_from_record(record)
    numbers: dict[Any, int] = {}
    first = build_samples([eval_episodes[0], traceless, eval_episodes[1]], numbers)
    again = build_samples([eval_episodes[0]], numbers)
    assert [row["rollout_number"] for row in first] == [1, 1]
    assert again[0]["rollout_number"] == 2
    assert numbers == {0: 2, 7: 1}
    assert episode_to_samples(traceless, numbers) == []
    assert episode_to_samples(eval_episodes[1], 5)[0]["rollout_number"] == 5
    assert episode_to_samples(eval_episodes[1], numbers)[0]["rollout_number"] == 2


# --- flattening and non-finite values --------------------------------------------------------------------------


def test_sub_rewards_never_clobber_a_column() -> None:
    """A sub-reward named ``reward`` or ``task`` leaves the column alone; others are flattened."""
    record = load_records("eval")[0]
    record["traces"][0]["rewards"] = {
        "reward": {"score": 0.25, "weight": 2.0},
        "task": {"score": 0.5, "weight": 1.0},
        "bonus": {"score": 0.125, "weight": 1.0},
        "skipped": None,
    }
    (row,) = build_samples([episode_from_record(record)])
    assert row["reward"] == 0.25 * 2.0 + 0.5 + 0.125
    assert isinstance(row["task"], dict) and row["task"]["idx"] == 0
    assert row["bonus"] == 0.125
    assert "skipped" not in row


def _nan_episode() -> Any:
    record = load_records("eval")[0]
    trace = record["traces"][0]
    trace["rewards"] = {"correct": {"score": NAN, "weight": 1.0}, "style": {"score": INF, "weight": 1.0}}
    trace["metrics"]["num_turns"] = INF
    trace["timing"]["start"] = NAN
    trace["info"] = {"advantage": NAN, "pair": (1.0, -INF)}
    return episode_from_record(record)


def test_non_finite_values_become_null_and_the_row_survives() -> None:
    """NaN/inf in rewards, metrics, timing, info (and inside the wrapper) are null; tuples are lists."""
    (sample,) = encode_samples([_nan_episode()])
    row = sample.row
    assert row["reward"] is None and row["correct"] is None and row["style"] is None
    assert row["metrics"]["num_turns"] is None
    assert row["timing"]["start"] is None
    assert row["info"]["advantage"] is None and row["info"]["pair"] == [1.0, None]
    wrapped = row["info"]["native_wrapper"]["traces"][0]
    assert wrapped["rewards"]["correct"]["score"] is None and wrapped["timing"]["start"] is None
    assert json.loads(sample.data) == row
    (request,) = pack_sample_requests([sample])
    assert json.loads(request.body)["samples"] == [row]


def test_trace_to_sample_nullifies_too() -> None:
    row = trace_to_sample(_nan_episode().traces[0], 3, "e1")
    assert row["reward"] is None and row["info"] == {"advantage": None, "pair": [1.0, None]}
    assert row["rollout_number"] == 3 and row["episode_id"] == "e1"
    compact_json(row)


# --- sharing the caller's record -------------------------------------------------------------------------------


@pytest.mark.parametrize("shared", ["mapping", "encoded"])
def test_a_shared_record_gives_the_same_rows_and_bytes_without_to_record(eval_episodes: list[Any], shared: str) -> None:
    expected = encode_samples(eval_episodes)
    episodes = [CountingEpisode(episode) for episode in eval_episodes]
    records = [episode.to_record() for episode in eval_episodes]
    given = records if shared == "mapping" else [EncodedRecord(record) for record in records]
    samples = encode_samples(episodes, records=given)
    assert [(s.row, s.data, s.source) for s in samples] == [(s.row, s.data, s.source) for s in expected]
    assert all(episode.to_record_calls == 0 for episode in episodes)


def test_an_encoded_record_with_nan_wraps_its_nullified_record() -> None:
    episode = _nan_episode()
    encoded = EncodedRecord(episode.to_record())
    (sample,) = encode_episode_samples(episode, 1, record=encoded)
    assert sample.row["info"]["native_wrapper"] is encoded.record
    assert json.loads(sample.data) == sample.row == encode_episode_samples(episode, 1)[0].row


# --- oversize episodes: one row per trace ----------------------------------------------------------------------


def test_an_episode_over_the_limit_falls_back_to_one_row_per_trace(caplog: pytest.LogCaptureFixture) -> None:
    """Two 9 MiB infos: the episode row (summary info + whole wrapper) is over 25 MiB, each trace row is not."""
    record = load_records("eval")[2]
    for trace in record["traces"]:
        trace["info"] = {"blob": "x" * (9 * 1024 * 1024)}
    episode = episode_from_record(record)
    numbers: dict[Any, int] = {3: 4}
    with caplog.at_level(logging.WARNING, logger="prime_otel.projection"):
        samples = encode_episode_samples(episode, numbers, source=7)
    assert [s.row["sample_id"] for s in samples] == [trace.id for trace in episode.traces]
    assert {s.row["episode_id"] for s in samples} == {episode.id}
    assert [s.row["rollout_number"] for s in samples] == [5, 5]
    assert all(set(s.row["info"]) == {"blob"} for s in samples)
    assert [s.source for s in samples] == [7, 7]
    assert episode.id in caplog.text
    assert len(pack_sample_requests(samples)) == 1


def test_the_fallback_uses_the_exact_compact_size(eval_episodes: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    (sample,) = encode_samples(eval_episodes[2:])
    monkeypatch.setattr(sample_rows, "MAX_SAMPLES_PAYLOAD_BYTES", ENVELOPE_BYTES + len(sample.data))
    assert [s.row["sample_id"] for s in encode_samples(eval_episodes[2:])] == [eval_episodes[2].id]
    monkeypatch.setattr(sample_rows, "MAX_SAMPLES_PAYLOAD_BYTES", ENVELOPE_BYTES + len(sample.data) - 1)
    rows = build_samples(eval_episodes[2:])
    assert [row["agent"] for row in rows] == ["solver", "judge"]


# --- packing: greedy, at most 25 MiB per request ---------------------------------------------------------------


_ROW_OVERHEAD = len(compact_json({"sample_id": "s", "pad": ""}))


def _row(size: int) -> dict[str, Any]:
    """A row whose compact JSON is exactly ``size`` bytes."""
    return {"sample_id": "s", "pad": "x" * (size - _ROW_OVERHEAD)}


def test_row_helper_sizes_are_exact() -> None:
    assert len(compact_json(_row(1000))) == 1000


def test_packing_limit_constants() -> None:
    assert MAX_SAMPLES_PAYLOAD_BYTES == 26214400 == 25 * 1024 * 1024
    assert ENVELOPE_BYTES == len(b'{"samples":[]}') == 14


def test_rows_that_fill_a_request_exactly_share_it() -> None:
    """Envelope (14) + row + comma (1) + row == 25 MiB: one request of exactly 25 MiB."""
    first_size = 10 * 1024 * 1024
    first, second = _row(first_size), _row(MAX_SAMPLES_PAYLOAD_BYTES - ENVELOPE_BYTES - 1 - first_size)
    (request,) = pack_sample_requests([first, second])
    assert len(request.body) == MAX_SAMPLES_PAYLOAD_BYTES
    assert request.rows == 2 and list(request.indices) == [0, 1] and request.row_indices == request.indices
    assert request.body == compact_json({"samples": [first, second]})


def test_one_byte_more_starts_a_second_request() -> None:
    first_size = 10 * 1024 * 1024
    second_size = MAX_SAMPLES_PAYLOAD_BYTES - ENVELOPE_BYTES - first_size
    rows = [_row(first_size), _row(second_size), _row(100)]
    requests = pack_sample_requests(rows)
    assert [list(r.indices) for r in requests] == [[0], [1, 2]]
    assert [r.rows for r in requests] == [1, 2]
    assert [len(r.body) for r in requests] == [ENVELOPE_BYTES + first_size, ENVELOPE_BYTES + second_size + 1 + 100]
    assert batch_samples(rows) == [rows[:1], rows[1:]]


def test_a_row_that_fits_alone_exactly_is_sent_and_one_byte_more_is_refused() -> None:
    """A single row over the limit is refused: that beats reporting a complete run that is missing rows."""
    (request,) = pack_sample_requests([_row(MAX_SAMPLES_PAYLOAD_BYTES - ENVELOPE_BYTES)])
    assert len(request.body) == MAX_SAMPLES_PAYLOAD_BYTES
    with pytest.raises(ValueError, match="sample 1 is too large"):
        pack_sample_requests([_row(50), _row(MAX_SAMPLES_PAYLOAD_BYTES - ENVELOPE_BYTES + 1)])


def test_packing_keeps_order_sources_and_nullifies_pass_through_rows(eval_episodes: list[Any]) -> None:
    """Pass-through v0 rows holding NaN are sent with null instead of refused."""
    samples = encode_samples(eval_episodes)
    ready = {"sample_id": "ready-1", "reward": NAN, "metrics": {"m": (INF, 1.0)}}
    mixed: list[dict[str, Any] | EncodedSample] = [*samples, ready]
    (request,) = pack_sample_requests(mixed)
    body = json.loads(request.body)["samples"]
    assert body[:3] == [s.row for s in samples]
    assert body[3] == {"sample_id": "ready-1", "reward": None, "metrics": {"m": [None, 1.0]}}
    assert [s.source for s in samples] == [0, 1, 2]
    assert pack_sample_requests([]) == []
