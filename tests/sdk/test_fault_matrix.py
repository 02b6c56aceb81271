"""Every endpoint the SDK calls, under every fault the local platform can inject, once and three times.

Whatever the platform does, a run leaves no duplicate there (sample rows, episodes, metric rows, Parquet rows),
every record it logged is either stored on the platform or counted exactly once in its report (delivered,
failed, possibly missing or still spooled), and the run ends with the platform status it was finished with.
Retry waits are shortened so that the matrix runs in about a minute; what is retried, and how often, is not.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prime_traces import traces as prime_traces_upload

import prime_otel as po
from prime_otel.client import _http, _rft
from prime_otel.testing import LocalPlatform, start_local_platform
from tests._fixtures import episode_from_record, load_records
from tests._platform import point_sdk_at

TEAM = "team_fault_matrix"
STEPS = 12
SAMPLE_EVERY = 4
EPISODES_PER_STEP = 2
EVAL_EPISODES = 3
_EVAL_RECORDS = load_records("eval")
_TRAIN_RECORDS = load_records("train")


@dataclass(frozen=True)
class Endpoint:
    kind: str
    method: str
    path: str
    finish_status: str = "completed"
    # Requests to the same route that come before the one under test (consumed by a no-op rule).
    before: int = 0


ENDPOINTS = {
    "eval create": Endpoint("eval", "POST", "/api/v1/evaluations/"),
    "eval samples": Endpoint("eval", "POST", "/api/v1/evaluations/*/samples"),
    "traces": Endpoint("eval", "POST", "/api/v1/traces"),
    "eval finalize": Endpoint("eval", "POST", "/api/v1/evaluations/*/finalize"),
    # The summary update is the run's first PUT on that route; the status write comes after it.
    "eval status write": Endpoint("eval", "PUT", "/api/v1/evaluations/*", finish_status="failed", before=1),
    "external-run create": Endpoint("train", "POST", "/api/v1/rft/external-runs"),
    "rft metrics": Endpoint("train", "POST", "/api/v1/rft/metrics"),
    "rft presign": Endpoint("train", "POST", "/api/v1/rft/samples/presign"),
    "object PUT": Endpoint("train", "PUT", "/_objects/*"),
    "rft confirm": Endpoint("train", "POST", "/api/v1/rft/samples/confirm"),
    "rft finalize": Endpoint("train", "POST", "/api/v1/rft/finalize"),
    "rft status write": Endpoint("train", "PUT", "/api/v1/rft/external-runs/*/status", finish_status="failed"),
}

FAULTS: dict[str, dict[str, Any]] = {
    "fail_before": {"action": "fail_before"},  # 503: the contract counts it ambiguous
    "fail_after": {"action": "fail_after"},  # 502 after the request was applied
    "reset_after": {"action": "reset_after"},  # connection dropped after the request was applied
    "rate_limit": {"action": "rate_limit", "retry_after": 0},
    "delay": {"action": "delay", "delay_s": 0.2},
}

PLATFORM_STATUS = {
    ("eval", "completed"): {"PROCESSING", "COMPLETED"},
    ("eval", "failed"): {"FAILED"},
    ("train", "completed"): {"COMPLETED"},
    ("train", "failed"): {"FAILED"},
}


@pytest.fixture(scope="module")
def matrix_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    """One platform for every case (runs are told apart by id), without rate limits: the matrix sends hundreds
    of metrics rows a minute, which would leave the session's shared platform rate-limiting the tests after it."""
    with start_local_platform(
        tmp_path_factory.mktemp("fault-matrix"), metrics_rate_limit=1_000_000, samples_rate_limit=1_000_000
    ) as platform:
        yield platform


@pytest.fixture
def platform(
    matrix_platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[LocalPlatform]:
    point_sdk_at(matrix_platform, monkeypatch, tmp_path)
    monkeypatch.setenv("PRIME_TEAM_ID", TEAM)
    monkeypatch.setattr(_http, "backoff_seconds", _short_backoff)
    monkeypatch.setattr(_rft, "backoff_seconds", _short_backoff)
    monkeypatch.setattr(prime_traces_upload, "retry_delay", lambda error, attempt: 0.01)
    try:
        yield matrix_platform
    finally:
        matrix_platform.inspect.clear_faults()


def _short_backoff(attempt: int, random: Any, retry_after: float | None = None) -> float:
    return 0.01


def _fresh(record: dict[str, Any], step: int | None = None) -> Any:
    """A real verifiers episode from a fixture record, with ids no other run of the session uses."""
    copied = copy.deepcopy(record)
    copied["id"] = f"ep-{uuid.uuid4().hex}"
    for trace in copied["traces"]:
        trace["id"] = f"tr-{uuid.uuid4().hex}"
    if step is not None:
        copied["run"]["work"]["step"] = step
    return episode_from_record(copied)


@dataclass
class Outcome:
    """What one case left behind, recorded before anything is asserted."""

    created: bool = False
    runs_with_name: int = 0
    status: str | None = None
    logged: dict[str, int] = field(default_factory=dict)
    stored: dict[str, int] = field(default_factory=dict)
    duplicates: dict[str, int] = field(default_factory=dict)
    sinks: dict[str, dict[str, int]] = field(default_factory=dict)


def _run_eval(name: str, finish_status: str, outcome: Outcome) -> po.Run:
    run = po.init(name=name, environments=["gsm8k"], model="m")
    outcome.created = True
    for index in range(EVAL_EPISODES):  # one request per episode, so that a fault can hit several in a row
        run.log_episodes([_fresh(_EVAL_RECORDS[index % len(_EVAL_RECORDS)])])
        run.flush()
    outcome.logged = {"traces": EVAL_EPISODES, "eval_samples": EVAL_EPISODES}
    run.finish(status=finish_status, error="stopped by the fault matrix" if finish_status != "completed" else None)
    return run


def _run_train(name: str, finish_status: str, outcome: Outcome) -> po.Run:
    run = po.init(kind="train", name=name, model="m", environments=["gsm8k"], samples_step_interval=SAMPLE_EVERY)
    outcome.created = True
    for step in range(1, STEPS + 1):
        run.log_episodes([_fresh(_TRAIN_RECORDS[i % len(_TRAIN_RECORDS)], step) for i in range(EPISODES_PER_STEP)])
        run.log_metrics({"loss": 1.0 / step}, step=step)  # one request per row, and one object per sampled step
    sampled = len([step for step in range(1, STEPS + 1) if step % SAMPLE_EVERY == 0]) * EPISODES_PER_STEP
    outcome.logged = {"traces": STEPS * EPISODES_PER_STEP, "rft_samples": sampled, "rft_metrics": STEPS}
    run.finish(status=finish_status, error="stopped by the fault matrix" if finish_status != "completed" else None)
    return run


def _duplicates(keys: list[Any]) -> int:
    return sum(count - 1 for count in Counter(keys).values())


def _inspect_platform(platform: LocalPlatform, run_id: str, kind: str, outcome: Outcome) -> None:
    snapshot = platform.inspect.run(run_id)
    outcome.status = snapshot["status"]
    episode_ids = [item["id"] for item in platform.inspect.episodes(run_id)["items"]]
    outcome.stored["traces"] = len(set(episode_ids))
    outcome.duplicates["traces"] = _duplicates(episode_ids)
    if kind == "eval":
        sample_ids = [row["sample_id"] for row in platform.inspect.samples(run_id)["items"]]
        outcome.stored["eval_samples"] = len(set(sample_ids))
        outcome.duplicates["eval_samples"] = _duplicates(sample_ids)
        return
    steps = [row["step"] for row in snapshot["metric_rows"]]
    outcome.stored["rft_metrics"] = len(set(steps))
    outcome.duplicates["rft_metrics"] = _duplicates(steps)
    parquet_keys = [
        (entry["step"], json.loads(row["info"])["native_wrapper"]["id"])
        for entry in platform.inspect.steps(run_id)
        for row in platform.inspect.step_rows(run_id, entry["step"])["items"]
    ]
    outcome.stored["rft_samples"] = len(set(parquet_keys))
    outcome.duplicates["rft_samples"] = _duplicates(parquet_keys)


def _install(platform: LocalPlatform, endpoint: Endpoint, fault: str, times: int) -> None:
    rules = []
    if endpoint.before:
        rules.append({"method": endpoint.method, "path": endpoint.path, "action": "delay", "times": endpoint.before})
    rules.append({"method": endpoint.method, "path": endpoint.path, "times": times, **FAULTS[fault]})
    platform.inspect.add_fault(rules=rules)


@pytest.mark.parametrize("times", [1, 3], ids=["once", "three times"])
@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("endpoint_name", list(ENDPOINTS))
def test_a_fault_leaves_no_duplicate_and_every_record_stored_or_counted_once(
    platform: LocalPlatform,
    endpoint_name: str,
    fault: str,
    times: int,
    record_property: Any,
) -> None:
    endpoint = ENDPOINTS[endpoint_name]
    name = f"fault-matrix-{uuid.uuid4().hex[:10]}"
    outcome = Outcome()
    _install(platform, endpoint, fault, times)
    run: po.Run | None = None
    failure: BaseException | None = None
    try:
        run = (_run_eval if endpoint.kind == "eval" else _run_train)(name, endpoint.finish_status, outcome)
    except (po.APIError, po.TransportError) as error:
        failure = error  # only a create may fail, and it must fail with a clear platform error
    finally:
        platform.inspect.clear_faults()
    outcome.runs_with_name = sum(1 for listed in platform.inspect.runs() if listed["name"] == name)
    if run is not None:
        _inspect_platform(platform, run.id, endpoint.kind, outcome)
        outcome.sinks = {
            sink.sink: {
                "delivered": sink.delivered,
                "failed": sink.failed,
                "dropped": sink.dropped,
                "possibly_missing": sink.possibly_missing,
                "pending": sink.pending,
            }
            for sink in run.report.sinks
        }
    record_property(
        "fault_matrix", json.dumps({"endpoint": endpoint_name, "fault": fault, "times": times, **vars(outcome)})
    )

    if failure is not None:
        assert endpoint_name.endswith("create") and not outcome.created, failure
        assert outcome.runs_with_name <= 1, "a failed create was replayed into a second run"
        return
    assert run is not None
    assert outcome.runs_with_name == 1
    assert all(count == 0 for count in outcome.duplicates.values()), outcome.duplicates
    for sink, counts in outcome.sinks.items():
        accounted = counts["delivered"] + counts["failed"] + counts["dropped"] + counts["possibly_missing"]
        assert accounted + counts["pending"] == outcome.logged[sink], (sink, counts)
        stored = outcome.stored[sink]
        assert counts["delivered"] <= stored <= counts["delivered"] + counts["possibly_missing"], (sink, counts, stored)
    assert outcome.status in PLATFORM_STATUS[(endpoint.kind, endpoint.finish_status)]


def _sink(run: po.Run, name: str) -> Any:
    return next(sink for sink in run.report.sinks if sink.sink == name)


def test_one_500_on_the_samples_post_is_replayed_from_the_spool_not_reported_possibly_missing(
    platform: LocalPlatform,
) -> None:
    """A 500 is an answer: nothing was applied, so the rows are kept and sent again, and land once."""
    platform.inspect.add_fault(method="POST", path="/api/v1/evaluations/*/samples", action="fail_before", status=500)
    outcome = Outcome()
    run = _run_eval(f"fault-500-{uuid.uuid4().hex[:10]}", "completed", outcome)
    samples = _sink(run, "eval_samples")
    assert (samples.delivered, samples.failed, samples.possibly_missing, samples.pending) == (3, 0, 0, 0)
    assert samples.replayed == 1  # the row of the request that got the 500
    _inspect_platform(platform, run.id, "eval", outcome)
    assert outcome.stored["eval_samples"] == 3 and outcome.duplicates["eval_samples"] == 0


def test_a_rejected_metrics_row_fails_with_the_platform_reason_and_is_never_spooled(platform: LocalPlatform) -> None:
    """A 4xx rejection is final: the row is counted failed with the platform's answer, not kept for a replay."""
    platform.inspect.add_fault(method="POST", path="/api/v1/rft/metrics", action="fail_before", status=422)
    outcome = Outcome()
    run = _run_train(f"fault-422-{uuid.uuid4().hex[:10]}", "completed", outcome)
    metrics = _sink(run, "rft_metrics")
    assert (metrics.delivered, metrics.failed, metrics.spooled, metrics.pending) == (STEPS - 1, 1, 0, 0)
    assert metrics.failure_reasons == {"rejected by the platform: 422": 1}
    assert "failed     1" in metrics.line() and not run.report.complete
    _inspect_platform(platform, run.id, "train", outcome)
    assert outcome.stored["rft_metrics"] == STEPS - 1


def test_a_traces_rejection_fails_the_upload_with_its_code_and_nothing_is_spooled(platform: LocalPlatform) -> None:
    platform.inspect.add_fault(
        method="POST", path="/api/v1/traces", action="fail_before", status=400, code="invalid_trace"
    )
    outcome = Outcome()
    run = _run_eval(f"fault-400-{uuid.uuid4().hex[:10]}", "completed", outcome)
    traces = _sink(run, "traces")
    assert (traces.delivered, traces.failed, traces.spooled, traces.pending) == (EVAL_EPISODES - 1, 1, 0, 0)
    assert traces.failure_reasons == {"rejected by the platform: 400 invalid_trace": 1}
    assert _sink(run, "eval_samples").delivered == EVAL_EPISODES


def test_a_row_the_platform_rejects_fails_alone_and_the_rest_of_its_request_is_stored(platform: LocalPlatform) -> None:
    """A 4xx answer to a multi-row request proves nothing was stored: the request is split until only the
    rejected row is left, and that row alone is counted failed with the platform's reason."""
    small = [_fresh(_EVAL_RECORDS[i % len(_EVAL_RECORDS)]) for i in range(7)]
    padded = copy.deepcopy(_EVAL_RECORDS[0])
    padded["traces"][0]["info"] = {"padding": "x" * 60_000}
    large = _fresh(padded)
    # Every small row fits, the seven together do not, and the padded row never does.
    platform.inspect.settings(samples_max_bytes=50_000)
    try:
        run = po.init(name=f"fault-413-{uuid.uuid4().hex[:10]}", environments=["gsm8k"], model="m", sinks="legacy")
        run.log_episodes([*small[:4], large, *small[4:]])
        run.finish()
    finally:
        platform.inspect.settings(samples_max_bytes=25 * 1024 * 1024)
    samples = _sink(run, "eval_samples")
    assert (samples.delivered, samples.failed, samples.possibly_missing, samples.pending) == (7, 1, 0, 0)
    assert samples.failure_reasons == {"rejected by the platform: 413": 1}
    stored = {row["episode_id"] for row in platform.inspect.samples(run.id)["items"]}
    assert stored == {episode.id for episode in small}
    posts = [r for r in platform.inspect.requests(limit=1000, run_id=run.id) if r["path"].endswith("/samples")]
    assert len(posts) <= 2 * 3 + 1  # a bisection: about two requests per halving, not one per row


def _received(platform: LocalPlatform, method: str, path: str) -> int:
    """Requests the platform received for ``path``, answered or not (a fault's answer names no run)."""
    return sum(1 for r in platform.inspect.requests(limit=2000) if (r["method"], r["path"]) == (method, path))


def test_rows_a_503_did_not_store_are_read_back_absent_and_sent_again_at_once(platform: LocalPlatform) -> None:
    platform.inspect.add_fault(method="POST", path="/api/v1/evaluations/*/samples", action="fail_before")
    outcome = Outcome()
    run = _run_eval(f"readback-503-{uuid.uuid4().hex[:10]}", "completed", outcome)
    samples = _sink(run, "eval_samples")
    assert (samples.delivered, samples.possibly_missing, samples.spooled) == (EVAL_EPISODES, 0, 0)
    samples_path = f"/api/v1/evaluations/{run.id}/samples"
    assert _received(platform, "POST", samples_path) == EVAL_EPISODES + 1  # the refused one again, after two reads
    assert _received(platform, "GET", samples_path) == 2
    _inspect_platform(platform, run.id, "eval", outcome)
    assert outcome.stored["eval_samples"] == EVAL_EPISODES and outcome.duplicates["eval_samples"] == 0


def test_rows_whose_read_back_fails_too_stay_possibly_missing_and_are_never_sent_again(
    platform: LocalPlatform,
) -> None:
    platform.inspect.add_fault(method="POST", path="/api/v1/evaluations/*/samples", action="fail_after")
    platform.inspect.add_fault(
        method="GET", path="/api/v1/evaluations/*/samples", action="fail_before", status=500, times=None
    )
    outcome = Outcome()
    run = _run_eval(f"readback-fails-{uuid.uuid4().hex[:10]}", "completed", outcome)
    samples = _sink(run, "eval_samples")
    assert (samples.delivered, samples.possibly_missing, samples.pending) == (EVAL_EPISODES - 1, 1, 0)
    assert _received(platform, "POST", f"/api/v1/evaluations/{run.id}/samples") == EVAL_EPISODES
    _inspect_platform(platform, run.id, "eval", outcome)
    assert outcome.stored["eval_samples"] == EVAL_EPISODES  # the "failed" request had stored its row


@pytest.mark.parametrize(("action", "finalize_posts"), [("fail_after", 1), ("reset_after", 1), ("fail_before", 2)])
def test_a_finalize_that_failed_ambiguously_is_read_back_and_sent_again_only_if_not_applied(
    platform: LocalPlatform, action: str, finalize_posts: int
) -> None:
    platform.inspect.add_fault(method="POST", path="/api/v1/evaluations/*/finalize", action=action)
    run = _run_eval(f"readback-finalize-{uuid.uuid4().hex[:10]}", "completed", Outcome())
    snapshot = platform.inspect.run(run.id)
    assert snapshot["status"] in {"PROCESSING", "COMPLETED"}
    assert _received(platform, "POST", f"/api/v1/evaluations/{run.id}/finalize") == finalize_posts
    assert run.errors == []
