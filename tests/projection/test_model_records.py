"""verifiers objects are encoded without ``to_record()`` (prime_otel.records._models): what is uploaded must still be
exactly ``to_record()``'s record (for the v0 and Parquet rows too), stamped the same way, for every graph
shape the generator makes (forks, second roots, failed calls without usage, compaction edges, several agents, NaN
metrics); and any model the encoder does not recognise, or that encodes differently, goes through ``to_record()``."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from pydantic import computed_field
from verifiers.v1.episode import WireEpisode
from verifiers.v1.trace import WireTrace

from prime_otel.records import EncodedRecord, UnencodableRecord, nullify, stamp_run
from prime_otel.records import _models as _model_records
from prime_otel.records._models import ModelRecordEncoder, TokenCounts, encode_record
from tests._fixtures import episode_from_record, load_records
from tests.projection._episode_gen import EpisodeGenerator

CASES = 300
RUN_ID = "eval-7f3c"


def _same_json(ours: Any, record: Any) -> bool:
    """Equal as JSON values, ``record``'s NaN/±inf counting as the null every sink uploads."""
    return json.dumps(ours, sort_keys=True, allow_nan=False) == json.dumps(nullify(record), sort_keys=True)


@pytest.fixture(scope="module")
def generated() -> list[Any]:
    generator = EpisodeGenerator(seed=4242)
    return [episode_from_record(generator.record()) for _ in range(CASES)]


def test_generated_episodes_encode_to_their_to_record(generated: list[Any]) -> None:
    encoder = ModelRecordEncoder()
    for episode in generated:
        encoded = encoder.encode(episode)
        assert encoded is not None, "a verifiers episode must take the fast path"
        expected = episode.to_record()
        assert _same_json(json.loads(encoded.plain), expected)
        assert _same_json(json.loads(encoded.stamped(RUN_ID, "eval")), stamp_run(expected, RUN_ID, "eval"))
        assert encoded.has_traces is bool(expected["traces"])


def test_bare_traces_encode_to_their_to_record(generated: list[Any]) -> None:
    encoder = ModelRecordEncoder()
    traces = [trace for episode in generated[:60] for trace in episode.traces]
    assert traces
    for trace in traces:
        encoded = encoder.encode(trace)
        assert encoded is not None
        assert _same_json(json.loads(encoded.plain), trace.to_record())
        stamped = json.loads(encoded.stamped(RUN_ID, "eval"))
        assert stamped["run"] == {"id": RUN_ID, "type": "eval"}
        assert encoded.has_traces is False


def test_token_counts_equal_verifiers_computed_fields(generated: list[Any]) -> None:
    forked = 0
    for episode in generated:
        for trace in episode.traces:
            counts = TokenCounts.of_trace(trace)
            assert (counts.input, counts.output, counts.total) == (
                trace.num_input_tokens,
                trace.num_output_tokens,
                trace.num_total_tokens,
            )
            forked += len(trace.branches) > 1
    assert forked, "the generated graphs must include forks for this test to mean anything"


def test_training_episodes_keep_their_run_block_and_stamp_it() -> None:
    encoder = ModelRecordEncoder()
    for record in load_records("train"):
        episode = episode_from_record(record)
        encoded = encoder.encode(episode)
        assert encoded is not None
        stamped = json.loads(encoded.stamped("rft-1", "train"))
        assert stamped["run"]["id"] == "rft-1" and stamped["run"]["type"] == "train"
        assert stamped["run"]["work"] == record["run"]["work"]
        assert all(member["run"] == stamped["run"] for member in stamped["traces"])


def test_non_finite_metrics_upload_as_null() -> None:
    record = load_records("eval")[0]
    record["traces"][0]["metrics"] = {"score": math.nan, "ratio": math.inf}
    encoded = ModelRecordEncoder().encode(episode_from_record(record))
    assert encoded is not None
    assert json.loads(encoded.plain)["traces"][0]["metrics"] == {"score": None, "ratio": None}


def test_mappings_and_other_objects_are_not_taken() -> None:
    encoder = ModelRecordEncoder()
    record = load_records("eval")[0]
    assert encoder.encode(record) is None
    assert encoder.encode(object()) is None
    assert isinstance(encode_record(record), EncodedRecord)


class _OwnRecordEpisode(WireEpisode):
    def to_record(self, float_decimals: int | None = 4) -> dict[str, Any]:
        return {"id": self.id, "traces": [], "custom": True}


class _ExtraComputedTrace(WireTrace):
    @computed_field  # type: ignore[prop-decorator]
    @property
    def num_turn_pairs(self) -> int:
        return 2 * self.num_turns


def test_a_subclass_with_its_own_to_record_goes_through_it() -> None:
    episode = _OwnRecordEpisode.model_validate(load_records("eval")[0])
    encoder = ModelRecordEncoder()
    assert encoder.encode(episode) is None
    assert json.loads(encode_record(episode).plain) == {"id": episode.id, "traces": [], "custom": True}


def test_unknown_computed_fields_go_through_to_record() -> None:
    trace = _ExtraComputedTrace.model_validate(load_records("eval")[0]["traces"][0])
    assert ModelRecordEncoder().encode(trace) is None
    assert json.loads(encode_record(trace).plain)["num_turn_pairs"] == 2 * trace.num_turns


def test_a_class_that_fails_to_encode_falls_back_for_good(monkeypatch: pytest.MonkeyPatch) -> None:
    encoder = ModelRecordEncoder()
    episode = episode_from_record(load_records("eval")[0])

    def broken(trace: Any) -> TokenCounts:
        raise ValueError("surprise")

    monkeypatch.setattr(_model_records.TokenCounts, "of_trace", broken)
    assert encoder.encode(episode) is None
    monkeypatch.undo()
    assert encoder.encode(episode) is None, "a class that failed once stays on to_record()"
    assert ModelRecordEncoder().encode(episode) is not None


def test_one_record_that_cannot_be_encoded_either_way_is_refused_and_its_class_stays_fast() -> None:
    """A lone surrogate fails the fast path and to_record()'s JSON alike: that record is refused with a reason, and
    the next record of its class is still encoded without to_record()."""
    encoder = ModelRecordEncoder()
    records = load_records("eval")
    records[0]["traces"][0]["info"] = {"note": "half a pair: \ud800"}
    bad, good = episode_from_record(records[0]), episode_from_record(records[1])
    with pytest.raises(UnencodableRecord) as refused:
        encoder.encode(bad)
    assert refused.value.reason == "invalid string (lone surrogate)"
    assert encoder.encode(good) is not None


def test_a_class_whose_first_record_differs_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    encoder = ModelRecordEncoder()
    episode = episode_from_record(load_records("eval")[0])
    monkeypatch.setattr(
        _model_records.TokenCounts, "json_members", lambda self: b'"num_input_tokens":-1,"num_output_tokens":0'
    )
    assert encoder.encode(episode) is None
    monkeypatch.undo()
    assert encoder.encode(episode) is None, "the class stays on to_record() for the rest of the process"
