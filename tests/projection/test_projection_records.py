"""Record helpers: recognising records, stamping the uploaded copy with the platform run, the two non-finite
policies (cleaning drops them, nullify makes them null) and the compact encoding, incl. the shared EncodedRecord."""

from __future__ import annotations

import copy
import json
import math
from collections import OrderedDict
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest

from prime_otel.records import EncodedRecord, clean, compact_json, is_episode, nullify, stamp_run, to_mapping
from tests._fixtures import EVAL_RUN_ID, TRAIN_RUN_ID, Kind, load_records, load_stamped

NAN = float("nan")
INF = float("inf")
RUN_IDS = {"eval": EVAL_RUN_ID, "train": TRAIN_RUN_ID}


class Weird(float):
    """A float subclass, like numpy.float64."""


class ArrayLike:
    """Comparing or truth-testing this raises, as a numpy array does."""

    def __eq__(self, other: object) -> bool:
        raise ValueError("truth value of an array is ambiguous")

    def __ne__(self, other: object) -> bool:
        raise ValueError("truth value of an array is ambiguous")

    def __bool__(self) -> bool:
        raise ValueError("truth value of an array is ambiguous")

    __hash__ = object.__hash__


# --- is_episode / to_mapping ---------------------------------------------------------------------------------


def test_is_episode_by_traces_key_or_attribute() -> None:
    assert is_episode({"traces": []})
    assert not is_episode({"id": "t1", "nodes": []})
    assert is_episode(SimpleNamespace(traces=[]))
    assert not is_episode(SimpleNamespace(nodes=[]))


def test_to_mapping_returns_a_mapping_itself_and_calls_to_record_otherwise() -> None:
    record = {"id": "t1"}
    assert to_mapping(record) is record
    proxy = MappingProxyType(record)
    assert to_mapping(proxy) is proxy
    assert to_mapping(SimpleNamespace(to_record=lambda: {"id": "e1"})) == {"id": "e1"}


@pytest.mark.parametrize(
    "record",
    [SimpleNamespace(id="x"), SimpleNamespace(to_record="not callable"), SimpleNamespace(to_record=lambda: ["x"]), 3],
)
def test_to_mapping_refuses_anything_else_with_type_error(record: Any) -> None:
    with pytest.raises(TypeError):
        to_mapping(record)


# --- stamp_run: only the uploaded copy carries the platform run ------------------------------------------------


@pytest.mark.parametrize("kind", ["eval", "train"])
def test_stamped_fixture_episodes_equal_the_uploaded_lines(kind: Kind) -> None:
    """Stamped, the fixture episodes are the exact line 0.1.4 uploaded, byte for byte (key order included)."""
    for record, expected in zip(load_records(kind), load_stamped(kind), strict=True):
        stamped = stamp_run(record, RUN_IDS[kind], kind)
        assert stamped == expected
        assert compact_json(stamped) == compact_json(expected)


def test_stamp_run_never_mutates_the_producer_record() -> None:
    """The producer's object (and everything inside it) is untouched; only envelope/members/run are new."""
    record: dict[str, Any] = {
        "id": "e1",
        "run": {"type": "train", "id": "local-7", "name": "rn", "work": {"type": "train", "step": 3}},
        "traces": [{"id": "t1"}, {"id": "t2", "run": {"id": "old", "name": "own"}}, "opaque"],
    }
    before = copy.deepcopy(record)
    members = record["traces"]
    stamped = stamp_run(record, "plat-1", "train")
    assert record == before
    assert record["traces"] is members
    assert stamped["traces"] is not members
    assert stamped["run"]["work"] is record["run"]["work"]  # shallow: nested blocks are shared, never edited


def test_stamp_run_rekeys_envelope_and_members_keeping_name_and_work() -> None:
    """Platform id and kind win over the producer's; name/work kept; members inherit the envelope."""
    record = {
        "id": "e1",
        "traces": [{"id": "t1"}, {"id": "t2", "run": {"name": "own", "id": "old", "type": "eval"}}, 7],
        "run": {"type": "eval", "id": "local-7", "name": "rn", "work": {"type": "eval", "step": 2}},
    }
    stamped = stamp_run(record, "plat-1", "eval")
    envelope_run = {"type": "eval", "id": "plat-1", "name": "rn", "work": {"type": "eval", "step": 2}}
    assert stamped["run"] == envelope_run
    assert list(stamped["run"]) == ["type", "id", "name", "work"]  # key order preserved
    assert stamped["traces"][0] == {"id": "t1", "run": envelope_run}
    assert stamped["traces"][1] == {"id": "t2", "run": {"name": "own", "id": "plat-1", "type": "eval"}}
    assert stamped["traces"][2] == 7


def test_stamp_run_appends_new_keys_and_starts_missing_blocks() -> None:
    """Bare dicts on a training run carry type "train"; a missing run block is appended last."""
    stamped = stamp_run({"id": "e1", "traces": [{"id": "t1", "run": None}]}, "plat-1", "train")
    assert list(stamped) == ["id", "traces", "run"]
    assert stamped["run"] == {"id": "plat-1", "type": "train"}
    assert stamped["traces"] == [{"id": "t1", "run": {"id": "plat-1", "type": "train"}}]
    assert stamp_run({"id": "t9"}, "plat-1", "train") == {"id": "t9", "run": {"id": "plat-1", "type": "train"}}


def test_stamp_run_leaves_a_tuple_of_members_untouched() -> None:
    members = ({"id": "t1"},)
    stamped = stamp_run({"traces": members}, "plat-1", "eval")
    assert stamped["traces"] is members


# --- EncodedRecord ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["eval", "train"])
def test_encoded_record_bytes_equal_the_encoded_record_and_stamped_line(kind: Kind) -> None:
    for record, expected in zip(load_records(kind), load_stamped(kind), strict=True):
        encoded = EncodedRecord(record)
        assert not encoded.nullified
        assert encoded.plain == compact_json(record)
        assert encoded.stamped(RUN_IDS[kind], kind) == compact_json(expected)
        other = "train" if kind == "eval" else "eval"
        assert encoded.stamped("x-1", other) == compact_json(stamp_run(record, "x-1", other))


@pytest.mark.parametrize(
    "record",
    [
        {},
        {"traces": []},
        {"traces": [{}, 3, "x", {"run": {"name": "n", "id": "x"}}, {"a": 1, "run": None}]},
        {"run": {"id": "a", "name": "n"}, "x": 1, "traces": [{"a": 1}], "y": [1, 2]},
        {"traces": ({"a": 1},), "run": 5},
        {"x": "é ☃", "traces": [{"run": {}, "b": 2}], "z": None},
        {"traces": "not a list", "run": {"a": 1}},
    ],
)
def test_encoded_record_matches_stamp_run_on_odd_shapes(record: dict[str, Any]) -> None:
    encoded = EncodedRecord(record)
    assert encoded.plain == compact_json(record)
    assert encoded.stamped("R", "train") == compact_json(stamp_run(record, "R", "train"))


def test_encoded_record_nullifies_non_finite_values() -> None:
    """The uploaded copy carries null for NaN/±inf instead of refusing the record."""
    record: dict[str, Any] = {"id": "e1", "traces": [{"metrics": {"m": NAN}}], "run": {"work": {"step": INF}}}
    encoded = EncodedRecord(record)
    assert encoded.nullified
    assert encoded.record == nullify(record)
    assert json.loads(encoded.stamped("R", "eval")) == {
        "id": "e1",
        "traces": [{"metrics": {"m": None}, "run": {"work": {"step": None}, "id": "R", "type": "eval"}}],
        "run": {"work": {"step": None}, "id": "R", "type": "eval"},
    }
    assert math.isnan(record["traces"][0]["metrics"]["m"])  # the producer's record is untouched


@pytest.mark.parametrize(
    "record",
    [
        {"id": "e1", "run": {"work": {"step": NAN}}, "traces": [{"id": "t1"}]},
        {"id": "e1", "traces": [{"id": "t1", "run": {"name": "n", "score": INF}}]},
    ],
)
def test_encoded_record_finds_non_finite_values_in_run_blocks_too(record: dict[str, Any]) -> None:
    encoded = EncodedRecord(record)
    assert encoded.nullified
    assert encoded.plain == compact_json(nullify(record))
    assert encoded.stamped("R", "train") == compact_json(stamp_run(nullify(record), "R", "train"))


# --- nullify: non-finite values become null --------------------------------------------------------------------


def test_nullify_replaces_every_non_finite_float_and_turns_tuples_into_lists() -> None:
    value: dict[str, Any] = {"a": NAN, "b": [1.0, -INF, (2, Weird("nan"))], "c": {"d": {"e": INF}}, "f": "nan", "g": 3}
    assert nullify(value) == {"a": None, "b": [1.0, None, [2, None]], "c": {"d": {"e": None}}, "f": "nan", "g": 3}
    assert math.isnan(value["a"])  # input untouched


def test_nullify_returns_unchanged_containers_themselves() -> None:
    inner = {"x": [1, 2.5, "s"]}
    value = {"inner": inner, "other": [inner]}
    assert nullify(value) is value
    changed = {"keep": inner, "drop": NAN}
    result = nullify(changed)
    assert result is not changed and result["keep"] is inner


# --- clean: non-finite values and emptied mappings are dropped -------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"loss": 0.5, "reward": NAN, "lr": INF}, {"loss": 0.5}),
        ({"perf": {"tps": -INF}}, {}),
        ({"perf": {}}, {}),
        ({"perf": {"gpu": {"util": NAN}, "tps": 3.0}}, {"perf": {"tps": 3.0}}),
        ({"hist": [1.0, NAN, {}, 2, INF]}, {"hist": [1.0, {}, 2]}),
        ({"pair": (1.0, NAN)}, {"pair": [1.0]}),
        ({"sub": Weird("inf"), "ok": Weird(1.5)}, {"ok": 1.5}),
        ({"s": "nan", "n": None, "b": True}, {"s": "nan", "n": None, "b": True}),
        ({"nested": [{"x": NAN}]}, {"nested": [{}]}),
    ],
)
def test_clean_rules(values: dict[str, Any], expected: dict[str, Any]) -> None:
    before = copy.deepcopy(values)
    assert clean(values) == expected
    assert repr(values) == repr(before)  # a copy: the caller's dict is untouched


def test_clean_never_compares_array_likes() -> None:
    array = ArrayLike()
    cleaned = clean({"weights": array, "ordered": OrderedDict(a=1.0)})
    assert cleaned["weights"] is array
    assert cleaned["ordered"] == {"a": 1.0}


# --- compact_json ----------------------------------------------------------------------------------------------


def test_compact_json_is_compact_utf8_and_refuses_nan() -> None:
    assert compact_json({"a": [1, "é☃"], "b": None}) == '{"a":[1,"é☃"],"b":null}'.encode()
    with pytest.raises(ValueError):
        compact_json({"a": NAN})
    with pytest.raises(TypeError):
        compact_json({"a": object()})
