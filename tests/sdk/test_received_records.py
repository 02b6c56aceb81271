"""A record received as JSON (a gateway's) is encoded by cutting the text it arrived as: the same bytes and the
same Prime Traces line as encoding the decoded record, and anything the cut could get wrong goes the ordinary
way."""

from __future__ import annotations

import json
import math

import pytest

from prime_otel.records import EncodedRecord, compact_json, decode_received
from tests._fixtures import load_records


@pytest.mark.parametrize("kind", ["eval", "train"])
def test_a_received_record_is_cut_to_the_bytes_encoding_would_give(kind: str) -> None:
    for record in load_records(kind):  # type: ignore[arg-type]
        text = compact_json(record).decode()
        decoded, encoded = decode_received(text)
        reference = EncodedRecord(record)
        assert decoded == record
        assert encoded is not None
        assert encoded.plain == reference.plain
        assert encoded.stamped("run-x", "eval") == reference.stamped("run-x", "eval")


def test_json_with_whitespace_and_member_run_blocks_stamps_like_the_decoded_record() -> None:
    record = {"id": "e1", "run": {"id": "old"}, "traces": [{"id": "t1"}, {"id": "t2", "run": {"id": "o"}}, 3]}
    decoded, encoded = decode_received(json.dumps(record, indent=2))
    assert decoded == record and encoded is not None
    assert json.loads(encoded.stamped("run-y", "train")) == json.loads(EncodedRecord(record).stamped("run-y", "train"))


@pytest.mark.parametrize(
    "text",
    ['{"id":"a","score":NaN}', '{"id":"a","id":"b"}', '{"id":"a","text":"\\ud800"}'],
    ids=["non-finite", "repeated key", "lone surrogate"],
)
def test_what_the_cut_could_get_wrong_is_left_to_the_encoder(text: str) -> None:
    decoded, encoded = decode_received(text)
    assert encoded is None
    assert decoded == json.loads(text) or math.isnan(decoded["score"])


@pytest.mark.parametrize("text", ["[1]", '"id"', '{"id":', '{"id":"a"} x', '{"id" "a"}'])
def test_text_that_is_no_record_raises_as_json_loads_does(text: str) -> None:
    with pytest.raises((json.JSONDecodeError, TypeError)):
        decode_received(text)
