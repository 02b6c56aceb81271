"""Every API route needs the key (Bearer or x-api-key); each service answers 401 in its own shape."""

from __future__ import annotations

import httpx
import pytest

from prime_otel.testing import LocalPlatform

from ._helpers import jsonl, upload

PLATFORM_CALLS = [
    ("POST", "/api/v1/environmentshub/resolve", {"name": "gsm8k"}),
    ("GET", "/api/v1/environmentshub/local/gsm8k/@latest", None),
    ("POST", "/api/v1/evaluations/", {"name": "x", "environments": [{"id": "e"}]}),
    ("PUT", "/api/v1/evaluations/eval-1", {"metadata": {}}),
    ("POST", "/api/v1/evaluations/eval-1/samples", {"samples": []}),
    ("POST", "/api/v1/evaluations/eval-1/finalize", {"metrics": {}}),
    ("POST", "/api/v1/rft/external-runs", {"base_model": "m", "environments": [], "team_id": "t"}),
    ("PUT", "/api/v1/rft/external-runs/r1/status", {"status": "failed"}),
    ("POST", "/api/v1/rft/finalize", {"run_id": "r1", "exit_code": 0}),
    ("POST", "/api/v1/rft/metrics", {"run_id": "r1", "metrics": {"step": 1}}),
    ("POST", "/api/v1/rft/samples/presign", {"run_id": "r1", "step": 1}),
    ("POST", "/api/v1/rft/samples/confirm", {"run_id": "r1", "step": 1, "s3_key": "k"}),
    ("POST", "/api/internal/rft/metrics", {"run_id": "r1", "metrics": {"step": 1}}),
    ("GET", "/_local/runs", None),
    ("GET", "/_local/requests", None),
    ("POST", "/_local/faults", {"action": "delay"}),
    ("POST", "/_local/settings", {"traces": "disabled"}),
]


@pytest.mark.parametrize(("method", "path", "body"), PLATFORM_CALLS)
@pytest.mark.parametrize("credential", [None, "Bearer wrong-key", "Basic Zm9vOmJhcg=="])
def test_platform_and_local_routes_refuse_a_missing_or_wrong_key(
    anonymous: httpx.Client, method: str, path: str, body: object, credential: str | None
) -> None:
    headers = {"Authorization": credential} if credential else {}
    response = anonymous.request(method, path, json=body, headers=headers)
    assert response.status_code == 401
    assert set(response.json()) == {"detail"}


@pytest.mark.parametrize("path", ["/api/v1/traces", "/api/v1/episodes", "/api/v1/traces/t1", "/api/v1/runs/r1"])
def test_traces_reads_refuse_without_a_key_in_the_traces_error_shape(anonymous: httpx.Client, path: str) -> None:
    response = anonymous.get(path)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"


def test_traces_upload_refuses_a_wrong_key(anonymous: httpx.Client) -> None:
    response = upload(anonymous, jsonl([{"id": "t1"}]), episodes=False, headers={"Authorization": "Bearer nope"})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"


def test_the_key_is_accepted_as_bearer_or_x_api_key(anonymous: httpx.Client, server: LocalPlatform) -> None:
    assert anonymous.get("/_local/runs", headers={"Authorization": f"Bearer {server.api_key}"}).status_code == 200
    assert anonymous.get("/_local/runs", headers={"x-api-key": server.api_key}).status_code == 200
    assert anonymous.get("/api/v1/traces", headers={"x-api-key": server.api_key}).status_code == 200


def test_a_hosted_run_token_reaches_neither_the_public_api_nor_local(
    anonymous: httpx.Client, server: LocalPlatform
) -> None:
    token = server.inspect.hosted_run("train")["token"]
    assert anonymous.get("/_local/runs", headers={"x-api-key": token}).status_code == 401
    response = anonymous.post(
        "/api/v1/environmentshub/resolve", json={"name": "gsm8k"}, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 401


def test_the_favicon_needs_no_key(anonymous: httpx.Client) -> None:
    assert anonymous.get("/favicon.ico").status_code == 204
