"""A training step costs one metrics request: every key of a step, from any number of threads and calls, is merged
on the client into one row, the run's own instruments are accumulated per step into the same row, integers arrive
exact, and a trainer faster than the platform's limit has its rows wait in step order instead of drawing 429s.

Against a fresh local platform with its default limit of 60 metrics requests per minute per token.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import prime_otel as po
from prime_otel.testing import LocalPlatform

TEAM = "team_abc"
THREADS = 4


@pytest.fixture
def train_env(platform_env: LocalPlatform, monkeypatch: pytest.MonkeyPatch) -> LocalPlatform:
    monkeypatch.setenv("PRIME_TEAM_ID", TEAM)
    return platform_env


def _metrics_posts(platform: LocalPlatform) -> list[dict[str, Any]]:
    requests = platform.inspect.requests(limit=10_000)  # a refused request is tied to no run
    return [r for r in requests if r["method"] == "POST" and r["path"].endswith("/rft/metrics")]


def _rows(platform: LocalPlatform, run_id: str) -> list[dict[str, Any]]:
    return list(platform.inspect.run(run_id)["metric_rows"])


def _in_threads(work: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=work, args=(index,)) for index in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_four_threads_logging_their_own_keys_cost_one_request_per_step(train_env: LocalPlatform) -> None:
    """4 threads x 50 steps, each thread its own key: 50 requests, no 429, 50 rows with all 4 keys."""
    run = po.init(kind="train", model="m", environments=["gsm8k"], team_id=TEAM)

    def trainer(index: int) -> None:
        for step in range(50):
            run.log_metrics({f"thread_{index}": step * 10 + index}, step=step)
            time.sleep(0.005)

    _in_threads(trainer)
    report = run.finish()

    assert report is not None and report.complete, report.render() if report else None
    posts = _metrics_posts(train_env)
    assert len(posts) == 50 and not [r for r in posts if r["status"] == 429]
    rows = _rows(train_env, run.id)
    assert [row["step"] for row in rows] == list(range(50))
    for row in rows:
        assert {key: row[key] for key in row if key.startswith("thread_")} == {
            f"thread_{index}": row["step"] * 10 + index for index in range(THREADS)
        }
    sink = next(sink for sink in report.sinks if sink.sink == "rft_metrics")
    assert sink.requests == 50 and sink.delivered == 50


def test_a_counter_and_a_histogram_are_aggregated_over_the_whole_step(train_env: LocalPlatform) -> None:
    """4 threads add 1 to a counter and record their index in a histogram at every step, with log_metrics calls
    and flushes collecting in between: each step stores the counter's sum (4) and the histogram's mean over all 4
    recordings (1.5), never a partial value of an earlier collection. A logged integer arrives exact."""
    run = po.init(kind="train", model="m", environments=["gsm8k"], team_id=TEAM)
    meter = run.meter()
    assert meter is not None
    counter = meter.create_counter("rollouts")
    histogram = meter.create_histogram("thread_index")

    def trainer(index: int) -> None:
        for step in range(20):
            attributes = {"prime.run.step": step}
            counter.add(1, attributes)
            run.log_metrics({f"seen_{index}": 1}, step=step)  # each call collects the instruments
            histogram.record(index, attributes)
            if index == 0 and step % 5 == 4:
                run.flush(30)
            time.sleep(0.002)

    _in_threads(trainer)
    run.log_metrics({"tokens": 12345678901234567}, step=19)
    report = run.finish()

    assert report is not None and report.complete, report.render() if report else None
    rows = _rows(train_env, run.id)
    assert [row["step"] for row in rows] == list(range(20))
    assert rows[-1]["tokens"] == 12345678901234567 and isinstance(rows[-1]["tokens"], int)
    assert [row["rollouts"] for row in rows] == [4] * 20
    assert all(isinstance(row["rollouts"], int) for row in rows)
    assert [row["thread_index"] for row in rows] == [pytest.approx(1.5)] * 20
    assert not [r for r in _metrics_posts(train_env) if r["status"] == 429]


def test_a_trainer_faster_than_the_limit_has_its_rows_sent_in_step_order_without_a_429(
    train_env: LocalPlatform,
) -> None:
    """70 steps logged at once against 60 requests a minute: the first 60 rows go out in step order, none draws a
    429, and the 10 the limit holds back past the finish budget wait in the spool (counted), none is lost."""
    run = po.init(kind="train", model="m", environments=["gsm8k"], team_id=TEAM)
    for step in range(70):
        run.log_metrics({"loss": 1 / (step + 1)}, step=step)
    report = run.finish(timeout=5)

    assert report is not None
    posts = _metrics_posts(train_env)
    assert len(posts) == 60 and not [r for r in posts if r["status"] == 429]
    assert [row["step"] for row in _rows(train_env, run.id)] == list(range(60))
    sink = next(sink for sink in report.sinks if sink.sink == "rft_metrics")
    assert (sink.delivered, sink.pending, sink.failed, sink.dropped) == (60, 10, 0, 0)
