"""Hosted runs: reachable through /api/internal with their own token, refused on the public root."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from prime_otel.testing import LocalPlatform

from ._helpers import FIXTURES, TIMEOUT, fixture_json


@pytest.fixture
def hosted_train(server: LocalPlatform) -> dict[str, str]:
    return {k: str(v) for k, v in server.inspect.hosted_run("train", name="hosted-train", team_id="team_abc").items()}


@pytest.fixture
def internal(server: LocalPlatform, hosted_train: dict[str, str]) -> Iterator[httpx.Client]:
    """What a hosted run's SDK sends: the token as Bearer and as x-api-key, under /api/internal."""
    token = hosted_train["token"]
    headers = {"Authorization": f"Bearer {token}", "x-api-key": token}
    with httpx.Client(base_url=f"{server.url}/api/internal", headers=headers, timeout=TIMEOUT) as client:
        yield client


def test_an_attached_training_run_works_through_the_internal_root(
    internal: httpx.Client, hosted_train: dict[str, str], server: LocalPlatform
) -> None:
    run_id = hosted_train["id"]
    assert internal.post("/rft/metrics", json={"run_id": run_id, "metrics": {"loss": 1, "step": 1}}).status_code == 200
    presigned = internal.post("/rft/samples/presign", json={"run_id": run_id, "step": 1}).json()["data"]
    put = httpx.put(
        presigned["presignedUrl"], content=(FIXTURES / "train/step-10.parquet").read_bytes(), timeout=TIMEOUT
    )
    assert put.status_code == 200
    confirm = {"run_id": run_id, "step": 1, "s3_key": presigned["s3Key"]}
    assert internal.post("/rft/samples/confirm", json=confirm).status_code == 200
    finalized = internal.post("/rft/finalize", json={"run_id": run_id, "exit_code": 0})
    assert finalized.json()["data"]["status"] == "success"
    snapshot = server.inspect.run(run_id)
    assert (snapshot["hosted"], snapshot["status"], len(snapshot["metric_rows"])) == (True, "COMPLETED", 1)
    assert snapshot["requests"]["POST /api/internal/rft/metrics"] == 1


def test_the_token_alone_in_x_api_key_is_enough(server: LocalPlatform, hosted_train: dict[str, str]) -> None:
    response = httpx.post(
        f"{server.url}/api/internal/rft/metrics",
        json={"run_id": hosted_train["id"], "metrics": {"step": 3}},
        headers={"x-api-key": hosted_train["token"]},
        timeout=TIMEOUT,
    )
    assert response.status_code == 200


def test_creation_and_status_writes_do_not_exist_on_the_internal_root(
    internal: httpx.Client, hosted_train: dict[str, str]
) -> None:
    create = internal.post("/rft/external-runs", json={"base_model": "m", "environments": [], "team_id": "t"})
    assert create.status_code in (400, 404)
    status = internal.put(f"/rft/external-runs/{hosted_train['id']}/status", json={"status": "failed"})
    assert status.status_code in (400, 404)
    assert internal.post("/evaluations/", json={"name": "x", "environments": [{"id": "e"}]}).status_code in (400, 404)


def test_the_public_root_answers_400_for_a_hosted_run(api: httpx.Client, hosted_train: dict[str, str]) -> None:
    run_id = hosted_train["id"]
    calls = [
        ("POST", "/api/v1/rft/finalize", {"run_id": run_id, "exit_code": 0}),
        ("POST", "/api/v1/rft/metrics", {"run_id": run_id, "metrics": {"step": 1}}),
        ("POST", "/api/v1/rft/samples/presign", {"run_id": run_id, "step": 1}),
        ("POST", "/api/v1/rft/samples/confirm", {"run_id": run_id, "step": 1, "s3_key": "k"}),
        ("PUT", f"/api/v1/rft/external-runs/{run_id}/status", {"status": "failed"}),
    ]
    for method, path, body in calls:
        assert api.request(method, path, json=body).status_code == 400, path


def test_a_token_reaches_only_its_own_run(server: LocalPlatform, internal: httpx.Client, api: httpx.Client) -> None:
    other = server.inspect.hosted_run("train")["id"]
    assert internal.post("/rft/metrics", json={"run_id": other, "metrics": {"step": 1}}).status_code == 404
    public = api.post("/api/v1/rft/external-runs", json={"base_model": "m", "environments": [], "team_id": "t"})
    public_id = public.json()["run"]["id"]
    assert internal.post("/rft/finalize", json={"run_id": public_id, "exit_code": 0}).status_code == 404


def test_the_account_key_is_not_a_run_token(server: LocalPlatform, hosted_train: dict[str, str]) -> None:
    response = httpx.post(
        f"{server.url}/api/internal/rft/metrics",
        json={"run_id": hosted_train["id"], "metrics": {"step": 1}},
        headers={"x-api-key": server.api_key},
        timeout=TIMEOUT,
    )
    assert response.status_code == 401


def test_a_hosted_evaluation_takes_samples_updates_and_finalize_but_no_status(server: LocalPlatform) -> None:
    hosted = server.inspect.hosted_run("eval", name="hosted-eval")
    evaluation_id, token = hosted["id"], hosted["token"]
    with httpx.Client(base_url=f"{server.url}/api/internal", headers={"x-api-key": token}, timeout=TIMEOUT) as client:
        pushed = client.post(f"/evaluations/{evaluation_id}/samples", json=fixture_json("eval/samples.json"))
        assert pushed.json()["samples_pushed"] == 3
        assert client.put(f"/evaluations/{evaluation_id}", json={"metrics": {"avg_reward": 1.0}}).status_code == 200
        assert client.put(f"/evaluations/{evaluation_id}", json={"status": "FAILED"}).status_code in (400, 404)
        finalized = client.post(f"/evaluations/{evaluation_id}/finalize", json={"metrics": {"avg_reward": 1.0}})
        assert finalized.json()["status"] == "PROCESSING"
    snapshot = server.inspect.run(evaluation_id)
    assert (snapshot["kind"], snapshot["hosted"], snapshot["num_samples"]) == ("eval", True, 3)
    assert snapshot["status"] in ("PROCESSING", "COMPLETED")


def test_a_hosted_evaluation_writes_through_the_public_root_with_its_sandbox_key(server: LocalPlatform) -> None:
    hosted = server.inspect.hosted_run("eval")
    evaluation_id = hosted["id"]
    other = server.inspect.hosted_run("eval")["id"]
    with httpx.Client(
        base_url=f"{server.url}/api/v1", headers={"Authorization": f"Bearer {hosted['token']}"}
    ) as client:
        assert client.post(f"/evaluations/{evaluation_id}/samples", json={"samples": [{"a": 1}]}).status_code == 200
        assert client.put(f"/evaluations/{evaluation_id}", json={"metrics": {"avg_reward": 0.5}}).status_code == 200
        assert client.put(f"/evaluations/{evaluation_id}", json={"status": "FAILED"}).status_code in (400, 404)
        assert client.post(f"/evaluations/{other}/samples", json={"samples": [{"a": 1}]}).status_code == 404
        assert client.post(f"/evaluations/{evaluation_id}/finalize", json={"metrics": {}}).status_code == 200
    assert server.inspect.run(evaluation_id)["num_samples"] == 1
    assert server.inspect.run(other)["num_samples"] == 0
