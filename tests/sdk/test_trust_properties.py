"""Property tests: random mixes of valid and invalid records and metrics, logged in random call sizes.

Whatever the mix, a valid record lands on the platform exactly once, an invalid one is either refused at the
call (the call raises and nothing of it is queued) or counted exactly once per sink, and the report adds up to
what was logged.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import prime_otel as po
from prime_otel.testing import LocalPlatform
from tests._fixtures import fresh_records


def _valid_record() -> dict[str, Any]:
    return fresh_records("eval", 1)[0]


def _deeply_nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def _circular() -> Any:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    return loop


# Values no JSON encoder can take: each makes its record unencodable, and only that record.
_POISONS: dict[str, Any] = {
    "decimal": lambda: decimal.Decimal("1.5"),
    "bytes": lambda: b"\x00\x01",
    "datetime": lambda: datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc),
    "set": lambda: {1, 2},
    "circular": _circular,
    "non-string key": lambda: {(1, 2): "tuple key"},
    "lone surrogate": lambda: "broken \ud800 text",
    "nested too deep": lambda: _deeply_nested(5_000),
}

# What ``log_episodes`` can refuse at the call: not a record at all, or a record without an id.
_REFUSED: dict[str, Any] = {
    "a number": lambda: 42,
    "a string": lambda: "episode",
    "None": lambda: None,
    "no id": lambda: {key: value for key, value in _valid_record().items() if key != "id"},
}


def _poisoned(kind: str) -> dict[str, Any]:
    record = _valid_record()
    record["task"]["data"]["extra"] = _POISONS[kind]()
    return record


_item = st.one_of(
    st.just(("valid", "")),
    st.sampled_from(sorted(_POISONS)).map(lambda kind: ("poison", kind)),
    st.sampled_from(sorted(_REFUSED)).map(lambda kind: ("refused", kind)),
)
_calls = st.lists(
    st.lists(_item, min_size=1, max_size=4).filter(
        # Mostly accepted calls, so that refused ones sit between batches that share a coalesced delivery.
        lambda call: sum(kind == "refused" for kind, _ in call) <= 1
    ),
    min_size=1,
    max_size=6,
)


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(calls=_calls)
def test_valid_episodes_land_once_and_every_invalid_one_is_refused_or_counted_once(
    shared_platform_env: LocalPlatform, calls: list[list[tuple[str, str]]]
) -> None:
    """Valid episodes land exactly once on both sinks; a poisoned one is counted once per sink with a reason;
    a call holding something that is not a record raises and queues nothing; the report adds up."""
    run = po.init(environments=["gsm8k"], model="m")
    landed_ids: set[str] = set()
    poisoned = 0
    for call in calls:
        records: list[Any] = []
        for kind, variant in call:
            if kind == "valid":
                records.append(_valid_record())
            elif kind == "poison":
                records.append(_poisoned(variant))
            else:
                records.append(_REFUSED[variant]())
        refused = any(kind == "refused" for kind, _ in call)
        if refused:
            with pytest.raises((TypeError, ValueError)):
                run.log_episodes(records)
            continue
        run.log_episodes(records)
        landed_ids.update(r["id"] for r, (kind, _) in zip(records, call, strict=True) if kind == "valid")
        poisoned += sum(kind == "poison" for kind, _ in call)
    report = run.finish()
    assert report is not None

    episodes = shared_platform_env.inspect.episodes(run.id)["items"]
    samples = shared_platform_env.inspect.samples(run.id)["items"]
    assert sorted(e["id"] for e in episodes) == sorted(landed_ids)
    assert sorted(s["sample_id"] for s in samples) == sorted(landed_ids)

    expected_failed = {"traces": poisoned, "eval_samples": poisoned} if poisoned else {}
    assert run.failed_records == expected_failed
    for sink in report.sinks:
        assert sink.delivered == len(landed_ids), sink
        assert sink.failed == poisoned, sink
        assert sum(sink.failure_reasons.values()) == poisoned, sink
        assert sink.delivered + sink.failed == len(landed_ids) + poisoned
    assert report.complete is (poisoned == 0)


_good_value = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["np.float32", "np.float64", "np.int64"]),
)
_bad_value = st.sampled_from(["a string", "a list", "a dict"])
_bad_step = st.sampled_from([True, 11.5, "12", -1, 10**20, 2**53])

_NUMPY = {"np.float32": np.float32(0.25), "np.float64": np.float64(0.5), "np.int64": np.int64(7)}
_BAD = {"a string": "x", "a list": [1, 2], "a dict": {"a": 1}}


def _metric_value(value: Any) -> Any:
    return _NUMPY.get(value, value) if isinstance(value, str) else value


_metric_call = st.one_of(
    st.tuples(st.just("good"), st.dictionaries(st.sampled_from("abcd"), _good_value, min_size=1, max_size=3)),
    st.tuples(st.just("bad value"), _bad_value),
    st.tuples(st.just("bad step"), _bad_step),
)


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(calls=st.lists(_metric_call, min_size=1, max_size=10))
def test_metric_rows_land_once_per_step_and_bad_calls_are_refused(
    shared_platform_env: LocalPlatform, calls: list[tuple[str, Any]]
) -> None:
    """Every accepted step's row lands once with its values as numbers (numpy scalars included); a call with a
    value that is not a number or a step that is not a non-negative integer below 2**53 raises and costs nothing
    else."""
    shared_platform_env.inspect.settings(metrics_rate_limit=100_000)
    run = po.init(kind="train", model="m", environments=["gsm8k"], team_id="team-a")
    expected: dict[int, dict[str, float]] = {}
    step = 0
    for kind, payload in calls:
        if kind == "good":
            values = {key: _metric_value(value) for key, value in payload.items()}
            run.log_metrics(values, step=step)
            expected[step] = {key: float(value) for key, value in values.items()}
            step += 1
        elif kind == "bad value":
            with pytest.raises((TypeError, ValueError)):
                run.log_metrics({"loss": _BAD[payload]}, step=step)
        else:
            with pytest.raises((TypeError, ValueError)):
                run.log_metrics({"loss": 1.0}, step=payload)
    report = run.finish()
    assert report is not None and report.complete, report.render()

    rows = {row["step"]: row for row in shared_platform_env.inspect.run(run.id)["metric_rows"]}
    assert sorted(rows) == sorted(expected)
    for at, values in expected.items():
        for key, value in values.items():
            assert rows[at][key] == pytest.approx(value, rel=1e-6), (at, key)
