"""TrainingRunsAPI and ObjectStorage: create, status, finalize, metrics, presign, storage PUT and confirm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from client_scripts import ok, reply

from prime_otel._types import EnvironmentRef, RunStatus, TrainingSpec
from prime_otel.client import TrainingRunsAPI
from prime_otel.errors import APIError, ForbiddenError, RetryableAPIError, TransportError, is_ambiguous

WIRE = Path(__file__).parent.parent / "fixtures" / "wire"
PRESIGNED = "https://storage.test/rft/r1/step_10_0001.parquet?X-Amz-Signature=s3cr3t"


def wire_request(name: str, method: str, path_suffix: str) -> dict[str, Any]:
    entries = json.loads((WIRE / name).read_text())
    return next(e for e in entries if e["method"] == method and e["url"].endswith(path_suffix))


def compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


@pytest.fixture
def make_api(make_http):
    def build(*outcomes: Any) -> tuple[TrainingRunsAPI, Any]:
        http, script = make_http(*outcomes)
        return TrainingRunsAPI(http), script

    return build


# --- create -----------------------------------------------------------------------------------


def test_create_body_matches_the_released_sdk_byte_for_byte(make_api) -> None:
    """Environments are passed through unresolved; optional keys follow the create body's documented order."""
    expected = wire_request("train-traces.json", "POST", "/rft/external-runs")
    body = TrainingRunsAPI.build_create_body(
        base_model="Qwen/Qwen3-4B-Instruct-2507",
        environments=[EnvironmentRef(slug="primeintellect/gsm8k")],
        team_id="team_abc",
        training=TrainingSpec(max_steps=200, batch_size=64, rollouts_per_example=8, seq_len=4096),
        name="qwen3-4b-gsm8k-grpo",
        run_config={"max_steps": 200, "batch_size": 64},
    )
    api, script = make_api(ok(expected["response"]["body"], 201))
    run = api.create(body)
    assert run == {"id": "cmf0x7r2k000108l4a9b2c3d4", "name": "qwen3-4b-gsm8k-grpo", "status": "RUNNING"}
    assert script.requests[0].content == compact(expected["body"])


def test_create_body_minimal_and_full() -> None:
    minimal = TrainingRunsAPI.build_create_body(base_model="m", environments=[EnvironmentRef(name="g")], team_id="t")
    assert minimal == {"base_model": "m", "max_steps": 0, "environments": [{"id": "g"}], "team_id": "t"}
    full = TrainingRunsAPI.build_create_body(
        base_model="m",
        environments=[EnvironmentRef(id="env_1", version_id="v2")],
        team_id="t",
        training=TrainingSpec(1, 2, 3, 4, "wp", "we", "wr"),
        name="n",
        run_config={"a": 1},
    )
    assert list(full) == [
        "base_model",
        "max_steps",
        "environments",
        "team_id",
        "name",
        "batch_size",
        "rollouts_per_example",
        "seq_len",
        "run_config",
        "wandb_project",
        "wandb_entity",
        "wandb_run_name",
    ]
    assert full["environments"] == [{"id": "env_1", "version_id": "v2"}]


@pytest.mark.parametrize("response", [{}, {"run": {}}, {"run": {"name": "n"}}, {"run": "r1"}])
def test_create_without_run_id_is_an_error(make_api, response: dict[str, Any]) -> None:
    """A create answer without a ``run.id`` is an error."""
    api, _ = make_api(ok(response, 201))
    with pytest.raises(APIError, match="no run id"):
        api.create({"base_model": "m"})


def test_create_forbidden_team_surfaces_as_forbidden_error(make_api) -> None:
    """A 403 for a team outside the allowlist surfaces as ForbiddenError."""
    api, _ = make_api(reply(403, {"detail": "External training runs are not enabled for this team"}))
    with pytest.raises(ForbiddenError, match="not enabled for this team"):
        api.create({"base_model": "m"})


def test_create_is_not_replayed_after_an_ambiguous_failure(make_api) -> None:
    api, script = make_api(httpx.RemoteProtocolError("server disconnected"), ok({"run": {"id": "r2"}}))
    with pytest.raises(TransportError):
        api.create({"base_model": "m"})
    assert len(script.requests) == 1


# --- status and finalize ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error", "body"),
    [
        (RunStatus.COMPLETED, None, {"status": "completed"}),
        (RunStatus.FAILED, "RuntimeError: oom", {"status": "failed", "error_message": "RuntimeError: oom"}),
        (RunStatus.FAILED, None, {"status": "failed", "error_message": "failed"}),
        (RunStatus.CANCELLED, "interrupted", {"status": "failed", "error_message": "cancelled: interrupted"}),
        (RunStatus.CRASHED, None, {"status": "failed", "error_message": "crashed: crashed"}),
    ],
)
def test_status_bodies(make_api, status: RunStatus, error: str | None, body: dict[str, str]) -> None:
    """Training status is completed or failed; cancelled and crashed go as failed with a "<status>: " prefix."""
    api, script = make_api(ok({"run": {"id": "r1", "status": body["status"]}}))
    assert api.set_status("r1", status, error) is True
    assert script.paths == ["PUT /api/v1/rft/external-runs/r1/status"]
    assert script.body() == body


def test_long_training_status_message_is_not_truncated(make_api) -> None:
    api, script = make_api(ok())
    api.set_status("r1", RunStatus.FAILED, "x" * 10_000)
    assert len(script.body()["error_message"]) == 10_000


def test_status_409_means_already_closed(make_api) -> None:
    """A 409 from the status endpoint means someone closed the run already: not an error."""
    api, _ = make_api(reply(409, {"detail": "Run is already completed"}))
    assert api.set_status("r1", RunStatus.FAILED, "boom") is False


def test_finalize_body_and_replay(make_api) -> None:
    """Finalize is compare-and-set on the server, so a replay after a lost response is safe."""
    expected = wire_request("train-traces.json", "POST", "/rft/finalize")
    api, script = make_api(httpx.ReadTimeout("lost"), ok(expected["response"]["body"]))
    api.finalize("cmf0x7r2k000108l4a9b2c3d4")
    assert script.paths == ["POST /api/v1/rft/finalize"] * 2
    assert script.requests[1].content == compact(expected["body"])


def test_metrics_row_body_and_replay(make_api) -> None:
    expected = wire_request("train-traces.json", "POST", "/rft/metrics")
    api, script = make_api(reply(503), ok(expected["response"]["body"]))
    api.post_metrics(expected["body"]["run_id"], expected["body"]["metrics"])
    assert len(script.requests) == 2
    assert script.requests[1].content == compact(expected["body"])


# --- presign and confirm ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "response",
    [
        {"data": {"presignedUrl": PRESIGNED, "s3Key": "k1", "expiresIn": 900}},
        {"data": {"presigned_url": PRESIGNED, "s3_key": "k1"}},
        {"presignedUrl": PRESIGNED, "s3Key": "k1"},
        {"presigned_url": PRESIGNED, "s3_key": "k1"},
    ],
)
def test_presign_accepts_every_response_shape(make_api, response: dict[str, Any]) -> None:
    api, script = make_api(ok(response))
    assert api.presign("r1", 10) == (PRESIGNED, "k1")
    assert script.body() == {"run_id": "r1", "step": 10}


@pytest.mark.parametrize(
    "response", [{}, {"data": {"presignedUrl": PRESIGNED}}, {"data": {"s3Key": "k"}}, {"data": [PRESIGNED]}]
)
def test_presign_without_url_or_key_is_permanent(make_api, response: dict[str, Any]) -> None:
    """A presign answer without the URL or the key is a permanent error, sent once."""
    api, script = make_api(ok(response))
    with pytest.raises(APIError) as caught:
        api.presign("r1", 10)
    assert not isinstance(caught.value, (RetryableAPIError, TransportError))
    assert caught.value.status_code is None
    assert len(script.requests) == 1


def test_presign_and_confirm_are_replayed_after_ambiguous_failures(make_api) -> None:
    expected = wire_request("train-legacy-fallback.json", "POST", "/rft/samples/confirm")
    api, script = make_api(
        reply(502), ok({"data": {"presignedUrl": PRESIGNED, "s3Key": "k1"}}), httpx.ReadError("reset"), ok()
    )
    assert api.presign("r1", 10) == (PRESIGNED, "k1")
    body = expected["body"]
    api.confirm(body["run_id"], body["step"], body["s3_key"])
    assert script.paths[-1] == "POST /api/v1/rft/samples/confirm"
    assert script.requests[-1].content == compact(body)
    assert len(script.requests) == 4


# --- object storage ---------------------------------------------------------------------------


def test_storage_put_is_bare(make_storage) -> None:
    """The presigned URL is the authorisation; platform credentials never reach storage."""
    storage, script = make_storage(httpx.Response(200))
    storage.put(PRESIGNED, b"PAR1 bytes")
    request = script.requests[0]
    assert str(request.url) == PRESIGNED
    assert request.method == "PUT"
    assert request.content == b"PAR1 bytes"
    assert request.headers["content-type"] == "application/parquet"
    assert "authorization" not in request.headers
    assert "x-api-key" not in request.headers
    assert request.extensions["timeout"]["read"] == 300.0
    assert (storage.requests, storage.bytes_sent) == (1, 10)


@pytest.mark.parametrize(
    "failure", [reply(503), reply(500), reply(429), httpx.ReadTimeout("lost"), httpx.ConnectError("refused")]
)
def test_storage_retries_three_times(make_storage, sleeps, failure: Any) -> None:
    storage, script = make_storage(failure)
    with pytest.raises((RetryableAPIError, TransportError)):
        storage.put(PRESIGNED, b"x")
    assert len(script.requests) == 3
    assert len(sleeps) == 2


def test_storage_recovers_within_its_attempts(make_storage) -> None:
    storage, script = make_storage(reply(503), httpx.WriteError("broken pipe"), httpx.Response(200))
    storage.put(PRESIGNED, b"x")
    assert len(script.requests) == 3


def test_storage_ignores_retry_after(make_storage, sleeps) -> None:
    storage, _ = make_storage(reply(429, headers={"Retry-After": "45"}), httpx.Response(200))
    storage.put(PRESIGNED, b"x")
    assert sleeps == [1.0]


@pytest.mark.parametrize("code", [403, 404, 400])
def test_storage_client_errors_are_permanent(make_storage, sleeps, code: int) -> None:
    """An expired URL answers 403: retrying cannot help."""
    storage, script = make_storage(httpx.Response(code, text="<Error><Code>AccessDenied</Code></Error>"))
    with pytest.raises(APIError) as caught:
        storage.put(PRESIGNED, b"x")
    assert not isinstance(caught.value, (RetryableAPIError, TransportError))
    assert caught.value.status_code == code
    assert "s3cr3t" not in str(caught.value)
    assert len(script.requests) == 1
    assert sleeps == []


def test_storage_does_not_follow_redirects(make_storage) -> None:
    storage, script = make_storage(httpx.Response(307, headers={"Location": "https://elsewhere.test/x"}))
    with pytest.raises(APIError) as caught:
        storage.put(PRESIGNED, b"x")
    assert caught.value.status_code == 307
    assert len(script.requests) == 1


def test_storage_transport_error_message_hides_the_signature(make_storage) -> None:
    storage, _ = make_storage(httpx.ConnectError("refused"))
    with pytest.raises(TransportError) as caught:
        storage.put(PRESIGNED, b"x")
    assert "s3cr3t" not in str(caught.value)
    assert not is_ambiguous(caught.value)


def test_storage_reset_after_fork_drops_the_client_without_closing_it(make_storage) -> None:
    storage, script = make_storage(httpx.Response(200))
    storage.put(PRESIGNED, b"x")
    storage.reset_after_fork()
    assert not script.closed
    storage.put(PRESIGNED, b"y")
    storage.close()
    assert script.closed
