"""Closing a run on the platform (``close_run``: update, then finalize), the one way ``finish()``, the gateway and
``prime-otel sync`` close a run: what a failed update costs with and without a listener, an attached run left to
its launcher, and a platform without the status write."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from prime_otel._backends import ClosedAs, EvalBackend, close_run
from prime_otel._types import EnvironmentRef, RunStatus
from prime_otel.client import EvaluationsAPI, PlatformHTTP, build_create_body
from prime_otel.errors import APIError
from prime_otel.testing import LocalPlatform


@pytest.fixture
def platform(local_platform_session: LocalPlatform) -> Iterator[LocalPlatform]:
    yield local_platform_session
    local_platform_session.reset()


@pytest.fixture
def api(platform: LocalPlatform) -> Iterator[EvaluationsAPI]:
    http = PlatformHTTP(api_key=platform.api_key, base_url=platform.url, sleep=lambda _: None)
    yield EvaluationsAPI(http)
    http.close()


def _open(api: EvaluationsAPI) -> str:
    environments = api.resolve_environments([EnvironmentRef(name="gsm8k")], None)
    return str(api.create(build_create_body(f"close-{secrets.token_hex(4)}", environments, []))["evaluation_id"])


def _finalizes(platform: LocalPlatform, run_id: str) -> int:
    counts: dict[str, int] = platform.inspect.run(run_id)["requests"]
    return sum(n for route, n in counts.items() if route.startswith("POST") and route.endswith("/finalize"))


def _refuse_the_update(platform: LocalPlatform) -> None:
    platform.inspect.add_fault(method="PUT", path="/api/v1/evaluations/*", action="fail_before", status=400)


def test_a_failed_update_is_told_to_the_listener_and_the_run_is_still_finalized(
    platform: LocalPlatform, api: EvaluationsAPI
) -> None:
    run_id = _open(api)
    _refuse_the_update(platform)
    told: list[Exception] = []

    closed = close_run(
        EvalBackend(api), run_id, RunStatus.COMPLETED, summary={"acc": 1.0}, error=None, on_update_failure=told.append
    )

    assert closed is ClosedAs.CONFIRMED
    assert len(told) == 1 and isinstance(told[0], APIError)
    assert platform.inspect.run(run_id)["status"] in ("PROCESSING", "COMPLETED")


def test_without_a_listener_a_failed_update_propagates_and_nothing_is_finalized(
    platform: LocalPlatform, api: EvaluationsAPI
) -> None:
    run_id = _open(api)
    _refuse_the_update(platform)

    with pytest.raises(APIError):
        close_run(EvalBackend(api), run_id, RunStatus.COMPLETED, summary={"acc": 1.0}, error=None)

    assert _finalizes(platform, run_id) == 0
    assert platform.inspect.run(run_id)["status"] == "RUNNING"


def test_an_attached_run_that_did_not_complete_keeps_its_config_and_status_for_the_launcher(
    platform: LocalPlatform, api: EvaluationsAPI
) -> None:
    run_id = _open(api)

    closed = close_run(
        EvalBackend(api),
        run_id,
        RunStatus.FAILED,
        summary={"acc": 0.5},
        error="boom",
        config={"lr": 0.1},
        attached=True,
    )

    assert closed is ClosedAs.LEFT_TO_LAUNCHER
    run: dict[str, Any] = platform.inspect.run(run_id)
    assert run["status"] == "RUNNING"
    assert run["summary"] == {"acc": 0.5}
    assert "lr" not in (run["metadata"] or {})


def test_a_platform_without_the_status_write_gets_the_status_in_the_run_metadata(
    platform: LocalPlatform, api: EvaluationsAPI
) -> None:
    run_id = _open(api)
    platform.inspect.settings(status_endpoint="absent")

    closed = close_run(EvalBackend(api), run_id, RunStatus.FAILED, summary=None, error="boom", config={"lr": 0.1})

    assert closed is ClosedAs.RECORDED_IN_METADATA
    metadata = platform.inspect.run(run_id)["metadata"]
    assert metadata["lr"] == 0.1
    assert metadata["prime_runs"] == {"status": "failed", "error": "boom"}
