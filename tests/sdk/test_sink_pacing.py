"""Each sink paces itself: the sample table packs what a fast producer logs into few requests and never draws a
429 under the platform's default limits, and a sink waiting out a long ``Retry-After`` holds back no other sink.

Every test runs against a fresh local platform with its default rate limits (300 sample appends and 60 metrics rows
per minute per token), so the limits are the platform's own and no other test shares the token's window.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import prime_otel as po
from prime_otel.testing import LocalPlatform
from tests._fixtures import fresh_records

SAMPLES_ROUTE = "/api/v1/evaluations/*/samples"
TRACES_PATH = "/api/v1/traces"


def _requests(platform: LocalPlatform) -> list[dict[str, Any]]:
    """Every request this test's platform received (a refused one is not tied to a run)."""
    return platform.inspect.requests(limit=10_000)


def _is_samples_post(request: dict[str, Any]) -> bool:
    return request["method"] == "POST" and request["path"].endswith("/samples")


def _is_traces_post(request: dict[str, Any]) -> bool:
    return request["method"] == "POST" and request["path"] == TRACES_PATH


def _at(request: dict[str, Any]) -> float:
    return datetime.fromisoformat(request["at"]).timestamp()


def _log_at_rate(run: po.Run, records: list[dict[str, Any]], per_second: float) -> None:
    """One episode per call, on a fixed schedule (as verifiers logs each finished rollout)."""
    start = time.monotonic()
    for index, record in enumerate(records):
        pause = start + index / per_second - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        run.log_episodes([record])


def test_a_producer_at_100_episodes_a_second_finishes_soon_after_its_last_call_with_no_429(
    platform_env: LocalPlatform,
) -> None:
    """sinks="dual" at 100 episodes/s for 10 s: every episode lands on both sinks, the sample table is written in
    about one request a second (far under its 300 a minute), the platform never answers 429, and finish() returns
    within a few seconds of the last call."""
    records = fresh_records("eval", 1000)
    run = po.init(environments=["gsm8k"], model="m", sinks="dual")
    _log_at_rate(run, records, per_second=100)
    last_call = time.monotonic()
    report = run.finish()
    finish_took = time.monotonic() - last_call

    assert report is not None and report.complete, report.render() if report else None
    snapshot = platform_env.inspect.run(run.id)
    assert snapshot["num_samples"] == 1000 and snapshot["num_episodes"] == 1000
    requests = _requests(platform_env)
    assert not [r for r in requests if r["status"] == 429]
    samples_posts = [r for r in requests if _is_samples_post(r)]
    assert len(samples_posts) <= 25  # lingering packs the 10 s of episodes into about one request a second
    samples_sink = next(sink for sink in report.sinks if sink.sink == "eval_samples")
    assert samples_sink.requests == len(samples_posts)
    assert finish_took < 10  # what is left after the last call is one linger and one request per sink


def test_a_sample_table_waiting_out_retry_after_30_holds_back_no_prime_traces_upload(
    platform_env: LocalPlatform,
) -> None:
    """The sample table answers 429 with Retry-After: 30. While its sink waits, Prime Traces uploads go on at their
    usual pace; at finish the waiting sink gives its wait up and writes what it owes within the budget."""
    platform_env.inspect.add_fault(method="POST", path=SAMPLES_ROUTE, action="rate_limit", retry_after=30, times=None)
    records = fresh_records("eval", 40)
    run = po.init(environments=["gsm8k"], model="m", sinks="dual")
    _log_at_rate(run, records[:10], per_second=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(r["status"] == 429 for r in _requests(platform_env)):
        time.sleep(0.05)
    _log_at_rate(run, records[10:], per_second=10)  # 3 s of episodes while the sample table's sink waits
    platform_env.inspect.clear_faults()
    report = run.finish(timeout=10)  # the wait would outlast the budget: given up, what is owed is written now

    assert report is not None and report.complete, report.render() if report else None
    requests = _requests(platform_env)
    refused = [r for r in requests if _is_samples_post(r) and r["status"] == 429]
    assert len(refused) == 1  # the sink waited instead of asking again
    after = [r for r in requests if _is_traces_post(r) and _at(r) > _at(refused[0])]
    assert len(after) >= 10  # Prime Traces kept uploading while the sample table's sink waited
    gaps = [later - earlier for earlier, later in zip(map(_at, after), map(_at, after[1:]), strict=False)]
    assert max(gaps) < 2  # episodes come every 0.1 s; no upload waited on the other sink
    snapshot = platform_env.inspect.run(run.id)
    assert snapshot["num_episodes"] == 40 and snapshot["num_samples"] == 40


def test_a_sink_that_only_fails_counts_every_request_and_its_error_once(platform_env: LocalPlatform) -> None:
    """Prime Traces answers 503 to every upload: the sink's report counts each of its attempts and their bytes, and
    run.errors lists the failure once (with how often it happened), however often it repeated."""
    platform_env.inspect.add_fault(method="POST", path=TRACES_PATH, action="fail_before", status=503, times=None)
    run = po.init(environments=["gsm8k"], model="m", sinks="dual")
    for record in fresh_records("eval", 6):
        run.log_episodes([record])
    report = run.finish(timeout=3)

    assert report is not None
    refused = [r for r in _requests(platform_env) if _is_traces_post(r) and r["status"] == 503]
    traces = next(sink for sink in report.sinks if sink.sink == "traces")
    assert traces.delivered == 0 and traces.pending == 6
    assert traces.requests == len(refused) > 0
    assert traces.bytes == sum(int(r["headers"]["content-length"]) for r in refused)
    assert len([error for error in run.errors if "traces sink" in error]) == 1
    samples = next(sink for sink in report.sinks if sink.sink == "eval_samples")
    assert samples.complete and samples.delivered == 6
