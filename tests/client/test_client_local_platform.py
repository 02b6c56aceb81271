"""The platform client against the real local platform and its "commit then fail" faults: what is replayed."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prime_otel._types import EnvironmentRef, RunStatus
from prime_otel.client import EvaluationsAPI, ObjectStorage, PlatformHTTP, TrainingRunsAPI, build_create_body
from prime_otel.errors import RetryableAPIError, TransportError
from prime_otel.testing import LocalPlatform

PARQUET = Path(__file__).parent.parent / "fixtures" / "train" / "step-10.parquet"
MAX_SLEEP = 5.0


class RecordedSleep(list[float]):
    """Records each wait instead of sleeping: the injected faults are counted, not timed."""

    def __call__(self, seconds: float) -> None:
        assert seconds <= MAX_SLEEP, f"asked to sleep {seconds} s"
        self.append(seconds)


@pytest.fixture
def platform(local_platform_session: LocalPlatform) -> Iterator[LocalPlatform]:
    yield local_platform_session
    local_platform_session.reset()


@pytest.fixture
def sleep() -> RecordedSleep:
    return RecordedSleep()


@pytest.fixture
def http(platform: LocalPlatform, sleep: RecordedSleep) -> Iterator[PlatformHTTP]:
    client = PlatformHTTP(api_key=platform.api_key, base_url=platform.url, sleep=sleep, random=lambda: 0.0)
    yield client
    client.close()


def unique(stem: str) -> str:
    return f"{stem}-{secrets.token_hex(4)}"


def route_count(platform: LocalPlatform, run_id: str, method: str, prefix: str) -> int:
    counts: dict[str, int] = platform.inspect.run(run_id)["requests"]
    return sum(n for route, n in counts.items() if route.startswith(f"{method} {prefix}"))


def runs_named(platform: LocalPlatform, name: str) -> list[dict[str, Any]]:
    return [run for run in platform.inspect.runs() if run["name"] == name]


def create_eval(http: PlatformHTTP, name: str) -> str:
    api = EvaluationsAPI(http)
    environments = api.resolve_environments([EnvironmentRef(name="gsm8k")], None)
    return str(api.create(build_create_body(name, environments, ["client-test"]))["evaluation_id"])


@pytest.mark.parametrize(("action", "error_type"), [("fail_after", RetryableAPIError), ("reset_after", TransportError)])
def test_lost_create_answer_is_not_replayed(
    platform: LocalPlatform, http: PlatformHTTP, action: str, error_type: type[Exception]
) -> None:
    """The server created the evaluation, the answer was lost: exactly one evaluation exists."""
    api = EvaluationsAPI(http)
    environments = api.resolve_environments([EnvironmentRef(name="gsm8k")], None)
    platform.inspect.add_fault(method="POST", path="/api/v1/evaluations/", action=action, status=502)
    name = unique("lost-create")
    with pytest.raises(error_type):
        api.create(build_create_body(name, environments, []))
    assert len(runs_named(platform, name)) == 1


def test_lost_samples_answer_is_not_replayed(platform: LocalPlatform, http: PlatformHTTP) -> None:
    """A lost answer to a samples POST is not replayed: a replay would append the rows twice."""
    evaluation_id = create_eval(http, unique("samples"))
    platform.inspect.add_fault(method="POST", path="/api/v1/evaluations/*/samples", action="fail_after", status=504)
    with pytest.raises(RetryableAPIError):
        EvaluationsAPI(http).append_samples(evaluation_id, [{"sample_id": 1, "reward": 1.0}])
    assert platform.inspect.samples(evaluation_id)["total"] == 1


def test_reset_status_put_is_replayed_and_the_replay_sees_the_run_closed(
    platform: LocalPlatform, http: PlatformHTTP
) -> None:
    evaluation_id = create_eval(http, unique("status"))
    platform.inspect.add_fault(method="PUT", path=f"/api/v1/evaluations/{evaluation_id}", action="reset_after")
    closed_now = EvaluationsAPI(http).set_status(evaluation_id, RunStatus.FAILED, "ValueError: bad")
    assert closed_now is True  # the first attempt closed it; the replay got 409 and read this status back
    run = platform.inspect.run(evaluation_id)
    assert (run["status"], run["error_message"]) == ("FAILED", "ValueError: bad")
    assert route_count(platform, evaluation_id, "PUT", "/api/v1/evaluations/") == 2


def test_reset_update_put_is_replayed(platform: LocalPlatform, http: PlatformHTTP) -> None:
    evaluation_id = create_eval(http, unique("update"))
    platform.inspect.add_fault(method="PUT", path=f"/api/v1/evaluations/{evaluation_id}", action="reset_after")
    EvaluationsAPI(http).update(evaluation_id, metadata={"lr": 0.1}, metrics={"avg_reward": 0.5})
    run = platform.inspect.run(evaluation_id)
    assert run["metadata"] == {"lr": 0.1}
    assert route_count(platform, evaluation_id, "PUT", "/api/v1/evaluations/") == 2


def test_rate_limited_metrics_are_waited_out(platform: LocalPlatform, http: PlatformHTTP, sleep: RecordedSleep) -> None:
    api = TrainingRunsAPI(http)
    body = api.build_create_body(base_model="m", environments=[EnvironmentRef(name="gsm8k")], team_id="team_abc")
    run_id = str(api.create(body)["id"])
    platform.inspect.add_fault(method="POST", path="/api/v1/rft/metrics", action="rate_limit", retry_after=0.2)
    api.post_metrics(run_id, {"loss": 0.5, "step": 3, "_timestamp": 1.0})
    assert sleep == [0.2]
    assert platform.inspect.run(run_id)["metric_rows"] == [{"loss": 0.5, "step": 3, "_timestamp": 1.0}]


def test_parquet_samples_survive_a_storage_outage(platform: LocalPlatform, http: PlatformHTTP) -> None:
    api = TrainingRunsAPI(http)
    body = api.build_create_body(base_model="m", environments=[EnvironmentRef(name="gsm8k")], team_id="team_abc")
    run_id = str(api.create(body)["id"])
    url, key = api.presign(run_id, 10)
    platform.inspect.add_fault(method="PUT", path="/_objects/*", action="fail_before", status=503)
    storage = ObjectStorage(sleep=RecordedSleep(), random=lambda: 0.0)
    try:
        storage.put(url, PARQUET.read_bytes())
    finally:
        storage.close()
    api.confirm(run_id, 10, key)
    assert storage.requests == 2
    assert platform.inspect.step_rows(run_id, 10)["total"] == 3
