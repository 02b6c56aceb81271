"""Evaluations: create, document replace, append-only samples, lifecycle and the status write."""

from __future__ import annotations

import json

import httpx
import pytest

from prime_otel.testing import LocalPlatform

from ._helpers import create_eval, fixture_json, wait_until

SAMPLES_LIMIT = 25 * 1024 * 1024


def _status(api: httpx.Client, evaluation_id: str) -> str:
    return str(api.get(f"/api/v1/evaluations/{evaluation_id}").json()["status"])


def test_create_answers_201_with_exactly_the_contract_fields(api: httpx.Client, server: LocalPlatform) -> None:
    body = {
        "name": "gsm8k-6e001f6b",
        "environments": [{"id": "env_123", "version_id": "v1"}],
        "tags": ["t"],
        "model_name": "m1",
        "dataset": "gsm8k",
        "framework": "verifiers",
        "metadata": {"a": 1},
        "team_id": "team_abc",
    }
    response = api.post("/api/v1/evaluations/", json=body)
    assert response.status_code == 201
    created = response.json()
    assert set(created) == {"evaluation_id", "name", "status", "eval_type", "viewer_url", "created_at"}
    assert created["name"] == "gsm8k-6e001f6b"
    assert created["status"] == "RUNNING"
    assert created["eval_type"] == "environment"
    assert created["viewer_url"] == f"{server.url}/runs/{created['evaluation_id']}"
    assert created["created_at"].endswith("Z")
    stored = api.get(f"/api/v1/evaluations/{created['evaluation_id']}").json()
    assert stored["environments"] == [{"id": "env_123", "version_id": "v1"}]
    assert (stored["model_name"], stored["dataset"], stored["framework"]) == ("m1", "gsm8k", "verifiers")


def test_create_without_a_name_is_422(api: httpx.Client) -> None:
    response = api.post("/api/v1/evaluations/", json={"environments": [{"id": "e"}]})
    assert response.status_code == 422
    assert "detail" in response.json()


@pytest.mark.parametrize(
    "raw",
    [
        b'{"name": "x",',
        b'{"name": NaN, "environments": [{"id": "e"}]}',
        b'{"name": "x", "environments": [{"id": "e"}], "metadata": {"big": 1e999}}',
        b"\xff\xfe",
    ],
)
def test_malformed_json_is_400(api: httpx.Client, raw: bytes) -> None:
    response = api.post("/api/v1/evaluations/", content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert "detail" in response.json()


def test_a_trailing_slash_less_create_is_redirected_to_the_canonical_path(api: httpx.Client) -> None:
    response = api.post("/api/v1/evaluations", json={"name": "no-slash", "environments": [{"id": "e"}]})
    assert response.status_code == 307
    assert response.headers["location"].endswith("/api/v1/evaluations/")


def test_update_replaces_the_metadata_document_instead_of_merging(api: httpx.Client, server: LocalPlatform) -> None:
    config = {"model": "m", "config_source": {"format": "toml", "text": "a = 1\n", "filename": "eval.toml"}}
    evaluation_id = create_eval(api, metadata=config)
    assert server.inspect.run(evaluation_id)["config_source"] == config["config_source"]
    response = api.put(f"/api/v1/evaluations/{evaluation_id}", json={"metadata": {"prime_runs": {"status": "x"}}})
    assert response.status_code == 200
    assert set(response.json()) == {"evaluation_id", "name", "status", "updated_at"}
    snapshot = server.inspect.run(evaluation_id)
    assert snapshot["metadata"] == {"prime_runs": {"status": "x"}}
    assert snapshot["config_source"] is None


def test_update_replaces_the_metrics_document(api: httpx.Client, server: LocalPlatform) -> None:
    evaluation_id = create_eval(api)
    api.put(f"/api/v1/evaluations/{evaluation_id}", json={"metrics": {"avg_reward": 0.5, "avg_error": 0.1}})
    api.put(f"/api/v1/evaluations/{evaluation_id}", json={"metrics": {"avg_reward": 0.75}})
    assert server.inspect.run(evaluation_id)["summary"] == {"avg_reward": 0.75}


def test_a_body_less_update_changes_nothing(api: httpx.Client, server: LocalPlatform) -> None:
    evaluation_id = create_eval(api, metadata={"keep": True})
    assert api.put(f"/api/v1/evaluations/{evaluation_id}").status_code == 200
    assert server.inspect.run(evaluation_id)["metadata"] == {"keep": True}


def test_samples_are_appended_without_deduplication(api: httpx.Client, server: LocalPlatform) -> None:
    evaluation_id = create_eval(api)
    body = fixture_json("eval/samples.json")
    first = api.post(f"/api/v1/evaluations/{evaluation_id}/samples", json=body)
    assert first.json() == {"evaluation_id": evaluation_id, "samples_pushed": 3, "status": "RUNNING"}
    api.post(f"/api/v1/evaluations/{evaluation_id}/samples", json=body)
    stored = server.inspect.samples(evaluation_id)
    assert stored["total"] == 6
    assert stored["items"] == body["samples"] + body["samples"]
    page = api.get(f"/api/v1/evaluations/{evaluation_id}/samples", params={"page": 2, "limit": 4}).json()
    assert (page["total"], len(page["samples"])) == (6, 2)


def _samples_body(size: int) -> bytes:
    envelope = b'{"samples":[{"blob":""}]}'
    padding = size - len(envelope)
    return b'{"samples":[{"blob":"' + b"a" * padding + b'"}]}'


def test_samples_bodies_up_to_25_mib_are_accepted_and_larger_ones_get_413(
    api: httpx.Client, server: LocalPlatform
) -> None:
    evaluation_id = create_eval(api)
    url = f"/api/v1/evaluations/{evaluation_id}/samples"
    headers = {"Content-Type": "application/json"}
    at_limit = api.post(url, content=_samples_body(SAMPLES_LIMIT), headers=headers)
    assert at_limit.status_code == 200
    over = api.post(url, content=_samples_body(SAMPLES_LIMIT + 1), headers=headers)
    assert over.status_code == 413
    assert "detail" in over.json()
    assert server.inspect.run(evaluation_id)["num_samples"] == 1


def test_lifecycle_running_processing_completed(api: httpx.Client, server: LocalPlatform) -> None:
    evaluation_id = create_eval(api)
    assert _status(api, evaluation_id) == "RUNNING"
    response = api.post(f"/api/v1/evaluations/{evaluation_id}/finalize", json={"metrics": {"avg_reward": 1.0}})
    assert response.json() == {"evaluation_id": evaluation_id, "status": "PROCESSING"}
    assert wait_until(lambda: _status(api, evaluation_id) == "COMPLETED")
    assert server.inspect.run(evaluation_id)["summary"] == {"avg_reward": 1.0}


def test_a_body_less_finalize_keeps_the_summary(api: httpx.Client, server: LocalPlatform) -> None:
    evaluation_id = create_eval(api)
    api.put(f"/api/v1/evaluations/{evaluation_id}", json={"metrics": {"avg_reward": 0.5}})
    assert api.post(f"/api/v1/evaluations/{evaluation_id}/finalize").status_code == 200
    assert server.inspect.run(evaluation_id)["summary"] == {"avg_reward": 0.5}


def test_finalize_and_samples_after_finalize_are_409(api: httpx.Client) -> None:
    evaluation_id = create_eval(api)
    api.post(f"/api/v1/evaluations/{evaluation_id}/finalize", json={"metrics": {}})
    assert api.post(f"/api/v1/evaluations/{evaluation_id}/finalize", json={"metrics": {}}).status_code == 409
    late = api.post(f"/api/v1/evaluations/{evaluation_id}/samples", json=fixture_json("eval/samples.json"))
    assert late.status_code == 409


@pytest.mark.parametrize("status", ["FAILED", "CANCELLED"])
def test_status_write_closes_a_running_evaluation_once(api: httpx.Client, server: LocalPlatform, status: str) -> None:
    evaluation_id = create_eval(api)
    body = {"status": status, "error_message": "crashed: boom"}
    first = api.put(f"/api/v1/evaluations/{evaluation_id}", json=body)
    assert first.status_code == 200
    assert first.json()["status"] == status
    replay = api.put(f"/api/v1/evaluations/{evaluation_id}", json={"status": "CANCELLED"})
    assert replay.status_code == 409
    snapshot = server.inspect.run(evaluation_id)
    assert (snapshot["status"], snapshot["error_message"]) == (status, "crashed: boom")
    assert api.post(f"/api/v1/evaluations/{evaluation_id}/finalize", json={"metrics": {}}).status_code == 409


def test_status_write_on_a_finalized_evaluation_is_409(api: httpx.Client) -> None:
    evaluation_id = create_eval(api)
    api.post(f"/api/v1/evaluations/{evaluation_id}/finalize", json={"metrics": {}})
    assert api.put(f"/api/v1/evaluations/{evaluation_id}", json={"status": "FAILED"}).status_code == 409
    assert wait_until(lambda: _status(api, evaluation_id) == "COMPLETED")
    assert api.put(f"/api/v1/evaluations/{evaluation_id}", json={"status": "FAILED"}).status_code == 409


def test_an_unknown_status_value_is_422(api: httpx.Client) -> None:
    evaluation_id = create_eval(api)
    assert api.put(f"/api/v1/evaluations/{evaluation_id}", json={"status": "COMPLETED"}).status_code == 422
    assert _status(api, evaluation_id) == "RUNNING"


def test_without_the_status_endpoint_a_status_write_is_404_and_changes_nothing(
    api: httpx.Client, server: LocalPlatform
) -> None:
    evaluation_id = create_eval(api, metadata={"a": 1})
    server.inspect.settings(status_endpoint="absent")
    response = api.put(f"/api/v1/evaluations/{evaluation_id}", json={"status": "FAILED", "metadata": {}})
    assert response.status_code == 404
    assert api.put(f"/api/v1/evaluations/{evaluation_id}", json={"metadata": {"b": 2}}).status_code == 200
    snapshot = server.inspect.run(evaluation_id)
    assert (snapshot["status"], snapshot["metadata"]) == ("RUNNING", {"b": 2})


def test_unknown_evaluations_are_404(api: httpx.Client) -> None:
    assert api.get("/api/v1/evaluations/eval-missing").status_code == 404
    assert api.put("/api/v1/evaluations/eval-missing", json={"metadata": {}}).status_code == 404
    response = api.post("/api/v1/evaluations/eval-missing/samples", json={"samples": []})
    assert response.status_code == 404
    assert json.loads(response.text)["detail"]
