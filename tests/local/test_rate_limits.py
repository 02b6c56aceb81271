"""Per-token request limits: evaluation samples and training metrics answer 429 with Retry-After (§5.5, §5.6)."""

from __future__ import annotations

import httpx

from prime_otel.testing import LocalPlatform

from ._helpers import create_eval, create_train


def _retry_after(response: httpx.Response) -> float:
    return float(response.headers["Retry-After"])


def test_samples_beyond_the_limit_get_429_with_retry_after(api: httpx.Client, server: LocalPlatform) -> None:
    evaluation_id = create_eval(api)
    server.inspect.settings(samples_rate_limit=3)
    url = f"/api/v1/evaluations/{evaluation_id}/samples"
    answers = [api.post(url, json={"samples": [{"i": i}]}) for i in range(5)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
    assert 0 < _retry_after(answers[3]) <= 60
    assert "detail" in answers[3].json()
    assert server.inspect.samples(evaluation_id)["total"] == 3


def test_metrics_beyond_the_limit_get_429_and_other_tokens_are_counted_apart(
    api: httpx.Client, server: LocalPlatform
) -> None:
    run_id = create_train(api)
    server.inspect.settings(metrics_rate_limit=2)
    answers = [api.post("/api/v1/rft/metrics", json={"run_id": run_id, "metrics": {"step": i}}) for i in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert 0 < _retry_after(answers[2]) <= 60
    assert len(server.inspect.run(run_id)["metric_rows"]) == 2
    hosted = server.inspect.hosted_run("train")
    response = httpx.post(
        f"{server.url}/api/internal/rft/metrics",
        json={"run_id": hosted["id"], "metrics": {"step": 0}},
        headers={"x-api-key": hosted["token"]},
    )
    assert response.status_code == 200
