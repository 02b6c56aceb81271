"""Per-token request limits: evaluation samples and training metrics answer 429 with Retry-After.

A server of their own: the shared one's key has already spent part of its minute.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from prime_otel.testing import LocalPlatform, start_local_platform

from ._helpers import TIMEOUT, create_eval, create_train


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    data = tmp_path_factory.mktemp("limited")
    with start_local_platform(data, samples_rate_limit=3, metrics_rate_limit=2) as platform:
        yield platform


@pytest.fixture
def client(limited: LocalPlatform) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=limited.url, headers={"Authorization": f"Bearer {limited.api_key}"}, timeout=TIMEOUT
    ) as client:
        yield client


def _retry_after(response: httpx.Response) -> float:
    return float(response.headers["Retry-After"])


def test_samples_beyond_the_limit_get_429_with_retry_after(client: httpx.Client, limited: LocalPlatform) -> None:
    evaluation_id = create_eval(client)
    url = f"/api/v1/evaluations/{evaluation_id}/samples"
    answers = [client.post(url, json={"samples": [{"i": i}]}) for i in range(5)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
    assert 0 < _retry_after(answers[3]) <= 60
    assert "detail" in answers[3].json()
    assert limited.inspect.samples(evaluation_id)["total"] == 3


def test_metrics_beyond_the_limit_get_429_and_other_tokens_are_counted_apart(
    client: httpx.Client, limited: LocalPlatform
) -> None:
    run_id = create_train(client)
    answers = [client.post("/api/v1/rft/metrics", json={"run_id": run_id, "metrics": {"step": i}}) for i in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert 0 < _retry_after(answers[2]) <= 60
    assert len(limited.inspect.run(run_id)["metric_rows"]) == 2
    hosted = limited.inspect.hosted_run("train")
    response = httpx.post(
        f"{limited.url}/api/internal/rft/metrics",
        json={"run_id": hosted["id"], "metrics": {"step": 0}},
        headers={"x-api-key": hosted["token"]},
        timeout=TIMEOUT,
    )
    assert response.status_code == 200


def test_limits_can_be_changed_at_runtime(client: httpx.Client, limited: LocalPlatform) -> None:
    evaluation_id = create_eval(client)
    limited.inspect.settings(samples_rate_limit=0)
    try:
        response = client.post(f"/api/v1/evaluations/{evaluation_id}/samples", json={"samples": []})
        assert response.status_code == 429
    finally:
        limited.reset()
