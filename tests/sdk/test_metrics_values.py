"""What ``run.log_metrics`` accepts as values and steps, and how every accepted row lands on the local platform:
numpy scalars as plain numbers, NaN/inf as null, and anything else refused at the call without costing other steps."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform

TEAM = "team_abc"


@pytest.fixture
def train_env(shared_platform_env: LocalPlatform, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalPlatform]:
    monkeypatch.setenv("PRIME_TEAM_ID", TEAM)
    shared_platform_env.inspect.settings(metrics_rate_limit=100_000)
    yield shared_platform_env


def _rows(platform: LocalPlatform, run_id: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k != "_timestamp"} for row in platform.inspect.run(run_id)["metric_rows"]]


def _metrics_requests(platform: LocalPlatform, run_id: str) -> list[dict[str, Any]]:
    return [r for r in platform.inspect.requests(limit=1000, run_id=run_id) if r["path"].endswith("/rft/metrics")]


def _metrics_sink(report: po.DeliveryReport | None) -> Any:
    assert report is not None
    return next(sink for sink in report.sinks if sink.sink == "rft_metrics")


def test_numpy_scalars_land_as_plain_numbers_at_every_step_and_integers_stay_integers(
    train_env: LocalPlatform,
) -> None:
    run = po.init(kind="train", model="m", environments=["gsm8k"], sinks="legacy")
    for step in range(1, 10):
        run.log_metrics(
            {
                "loss": np.float32(1.0 / 2**step),
                "reward": np.float64(step / 10),
                "tokens": np.int64(1000 * step),
                "clipped": np.bool_(step % 2 == 0),
                "done": step == 9,
                "lr": np.array(0.25),
                "batch": np.array(32),
            },
            step=np.int64(step),
        )
    report = run.finish()

    assert report is not None and report.complete, report.render()
    rows = _rows(train_env, run.id)
    assert [row["step"] for row in rows] == list(range(1, 10))
    for step, row in enumerate(rows, start=1):
        assert row == {
            "loss": 1.0 / 2**step,
            "reward": step / 10,
            "tokens": 1000 * step,
            "clipped": 1 if step % 2 == 0 else 0,
            "done": 1 if step == 9 else 0,
            "lr": 0.25,
            "batch": 32,
            "step": step,
        }
        assert type(row["tokens"]) is int and type(row["batch"]) is int and type(row["clipped"]) is int
        assert type(row["loss"]) is float and type(row["lr"]) is float


def test_non_finite_values_are_stored_as_null_and_the_row_survives(train_env: LocalPlatform) -> None:
    run = po.init(kind="train", model="m", environments=["gsm8k"], sinks="legacy")
    run.log_metrics(
        {"nan": math.nan, "inf": math.inf, "ninf": -math.inf, "np_nan": np.float32("nan"), "none": None, "ok": 1.5},
        step=1,
    )
    run.log_metrics({"loss": np.float64("inf"), "ok": 2.5}, step=2)
    report = run.finish()

    assert report is not None and report.complete, report.render()
    assert _rows(train_env, run.id) == [
        {"nan": None, "inf": None, "ninf": None, "np_nan": None, "none": None, "ok": 1.5, "step": 1},
        {"loss": None, "ok": 2.5, "step": 2},
    ]


_BAD_VALUES: list[tuple[dict[Any, Any], str]] = [
    ({"loss": 0.5, "label": "warmup"}, "'label'"),
    ({"loss": 0.5, "number_as_text": "12"}, "'number_as_text'"),
    ({"loss": 0.5, "history": [0.1, 0.2]}, "'history'"),
    ({"loss": 0.5, "nested": {"a": 1.0}}, "'nested'"),
    ({"loss": 0.5, "thing": object()}, "'thing'"),
    ({"loss": 0.5, "vector": np.array([1.0, 2.0])}, "'vector'"),
    ({"loss": 0.5, "complex": 1 + 2j}, "'complex'"),
    ({"loss": 0.5, 7: 1.0}, "7"),
]


def test_a_non_numeric_value_or_key_is_refused_at_the_call_and_costs_no_other_step(train_env: LocalPlatform) -> None:
    run = po.init(kind="train", model="m", environments=["gsm8k"], sinks="legacy")
    for step in range(1, 7):
        if step == 3:
            for values, named in _BAD_VALUES:
                with pytest.raises(TypeError, match=named):
                    run.log_metrics(values, step=step)
        run.log_metrics({"loss": 1.0 / step}, step=step)
    report = run.finish()

    assert report is not None and report.complete, report.render()
    assert _rows(train_env, run.id) == [{"loss": 1.0 / step, "step": step} for step in range(1, 7)]
    # Nothing of a refused call was queued: one request per good step, none for the refused ones.
    assert len(_metrics_requests(train_env, run.id)) == _metrics_sink(report).delivered == 6


_BAD_STEPS: list[Any] = [True, np.bool_(False), 11.5, 12.0, "12", None, -1, 10**20, 2**53]


def test_a_step_that_is_not_an_integer_from_0_to_2_53_is_refused_and_the_sink_keeps_writing(
    train_env: LocalPlatform,
) -> None:
    run = po.init(kind="train", model="m", environments=["gsm8k"], sinks="legacy")
    logged = []
    for step, bad in enumerate(_BAD_STEPS, start=1):
        run.log_metrics({"loss": 1.0 / step}, step=step)
        logged.append(step)
        if bad is not None:  # step=None means "no step"; a "step" key of None is refused
            with pytest.raises((TypeError, ValueError), match="step="):
                run.log_metrics({"loss": 0.0}, step=bad)
        with pytest.raises((TypeError, ValueError), match="'step'"):
            run.log_metrics({"loss": 0.0, "step": bad})
    last = np.int64(2**53 - 1)  # the largest step a double-based reader keeps exact; numpy integers are taken
    run.log_metrics({"loss": 0.0}, step=last)
    report = run.finish()

    assert report is not None and report.complete, report.render()
    sink = _metrics_sink(report)
    assert sink.state == "ok" and sink.failed == 0
    assert _rows(train_env, run.id) == [
        *({"loss": 1.0 / step, "step": step} for step in logged),
        {"loss": 0.0, "step": 2**53 - 1},
    ]
    assert len(_metrics_requests(train_env, run.id)) == len(logged) + 1


def test_a_row_the_platform_rejects_costs_only_that_row_and_later_steps_land(train_env: LocalPlatform) -> None:
    """Without a spool to keep it, a rejected row is counted failed; the sink stays enabled for the next steps."""
    run = po.init(kind="train", model="m", environments=["gsm8k"], sinks="legacy", spool=False)
    train_env.inspect.add_fault(
        method="POST", path="/api/v1/rft/metrics", action="fail_before", status=422, message="row refused"
    )
    for step in range(1, 5):
        run.log_metrics({"loss": 1.0 / step}, step=step)
        assert run.flush(30)
    report = run.finish()

    sink = _metrics_sink(report)
    assert (sink.state, sink.failed, sink.delivered) == ("ok", 1, 3)
    assert run.failed_records == {"rft_metrics": 1}
    assert [row["step"] for row in _rows(train_env, run.id)] == [2, 3, 4]


def test_a_summary_of_numpy_scalars_is_stored_as_numbers(shared_platform_env: LocalPlatform) -> None:
    run = po.init(name="numpy-summary", environments=["gsm8k"], model="m")
    run.update_summary({"avg_reward": np.float32(0.75), "episodes": np.int64(12), "ok": np.bool_(True)})
    report = run.finish()

    assert report is not None and not run.errors, run.errors
    summary = shared_platform_env.inspect.run(run.id)["summary"]
    assert (summary["avg_reward"], summary["episodes"], summary["ok"]) == (0.75, 12, True)


def test_an_offline_run_writes_numpy_rows_as_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIME_RUNS_DIR", str(tmp_path / "runs"))
    run = po.init(kind="train", model="m", environments=["gsm8k"], mode="offline")
    run.log_metrics({"loss": np.float32(0.5), "tokens": np.int64(7)}, step=np.int32(3))
    with pytest.raises(TypeError, match="'label'"):
        run.log_metrics({"label": "x"}, step=4)
    run.finish()

    assert run.folder is not None
    lines = (Path(run.folder) / "metrics.jsonl").read_text().splitlines()
    assert [{k: v for k, v in json.loads(line).items() if k != "_timestamp"} for line in lines] == [
        {"loss": 0.5, "tokens": 7, "step": 3}
    ]


def test_instrument_points_keep_integers_and_a_point_with_an_impossible_step_is_not_uploaded(
    train_env: LocalPlatform, caplog: pytest.LogCaptureFixture
) -> None:
    run = po.init(kind="train", model="m", environments=["gsm8k"], sinks="legacy")
    meter = run.meter()
    assert meter is not None
    tokens = meter.create_counter("tokens")
    for step in (1, 2):
        tokens.add(10 * step, {"prime.run.step": step})
    tokens.add(5, {"prime.run.step": -1})
    tokens.add(5, {"prime.run.step": 2**53})
    report = run.finish()

    assert report is not None and report.complete, report.render()
    rows = _rows(train_env, run.id)
    assert rows == [{"tokens": 10, "step": 1}, {"tokens": 20, "step": 2}]
    assert all(type(row["tokens"]) is int for row in rows)
    assert "belong to no step" in caplog.text
