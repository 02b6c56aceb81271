"""External training runs: create, status, finalize, metrics, presigned objects."""

from __future__ import annotations

import time
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from prime_otel.testing import LocalPlatform

from ._helpers import FIXTURES, TIMEOUT, create_train, fixture_json

PARQUET = (FIXTURES / "train/step-10.parquet").read_bytes()


def _presign(api: httpx.Client, run_id: str, step: int) -> dict[str, object]:
    response = api.post("/api/v1/rft/samples/presign", json={"run_id": run_id, "step": step})
    assert response.status_code == 200
    return dict(response.json()["data"])


def _store(api: httpx.Client, run_id: str, step: int, *, confirm: bool = True) -> str:
    presigned = _presign(api, run_id, step)
    put = httpx.put(
        str(presigned["presignedUrl"]),
        content=PARQUET,
        headers={"Content-Type": "application/parquet"},
        timeout=TIMEOUT,
    )
    assert put.status_code == 200
    key = str(presigned["s3Key"])
    if confirm:
        body = {"run_id": run_id, "step": step, "s3_key": key}
        assert api.post("/api/v1/rft/samples/confirm", json=body).json() == {"data": {"status": "success"}}
    return key


def test_create_answers_201_with_the_run(api: httpx.Client, server: LocalPlatform) -> None:
    body = fixture_json("wire/train-traces.json")[0]["body"]
    response = api.post("/api/v1/rft/external-runs", json=body)
    assert response.status_code == 201
    run = response.json()["run"]
    assert set(run) == {"id", "name", "status"}
    assert (run["name"], run["status"]) == ("qwen3-4b-gsm8k-grpo", "RUNNING")
    snapshot = server.inspect.run(run["id"])
    assert (snapshot["kind"], snapshot["model"], snapshot["team_id"]) == ("train", body["base_model"], "team_abc")
    assert snapshot["run_config"] == body["run_config"]


@pytest.mark.parametrize("team", [None, ""])
def test_create_without_a_team_is_422(api: httpx.Client, team: str | None) -> None:
    body = {"base_model": "m", "environments": [], **({} if team is None else {"team_id": team})}
    assert api.post("/api/v1/rft/external-runs", json=body).status_code == 422


def test_a_team_outside_the_allowlist_is_403(api: httpx.Client, server: LocalPlatform) -> None:
    server.inspect.settings(teams=["team_allowed"])
    refused = api.post("/api/v1/rft/external-runs", json={"base_model": "m", "environments": [], "team_id": "other"})
    assert refused.status_code == 403
    assert refused.json() == {"detail": "External training runs are not enabled for this team"}
    create_train(api, team_id="team_allowed")


def test_status_closes_a_run_once(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_train(api)
    body = {"status": "failed", "error_message": "cancelled: by user"}
    response = api.put(f"/api/v1/rft/external-runs/{run_id}/status", json=body)
    assert response.json() == {"run": {"id": run_id, "status": "FAILED"}}
    assert api.put(f"/api/v1/rft/external-runs/{run_id}/status", json={"status": "completed"}).status_code == 409
    snapshot = server.inspect.run(run_id)
    assert (snapshot["status"], snapshot["error_message"]) == ("FAILED", "cancelled: by user")


def test_status_accepts_only_the_rft_vocabulary(api: httpx.Client) -> None:
    run_id = create_train(api)
    assert api.put(f"/api/v1/rft/external-runs/{run_id}/status", json={"status": "cancelled"}).status_code == 422


def test_finalize_is_compare_and_set_and_a_replay_is_success(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_train(api)
    first = api.post("/api/v1/rft/finalize", json={"run_id": run_id, "exit_code": 0})
    assert first.json() == {"data": {"status": "success", "message": "Run finalized successfully"}}
    replay = api.post("/api/v1/rft/finalize", json={"run_id": run_id, "exit_code": 0})
    assert replay.json() == {"data": {"status": "success", "message": "Run already finalized"}}
    assert server.inspect.run(run_id)["status"] == "COMPLETED"
    assert api.put(f"/api/v1/rft/external-runs/{run_id}/status", json={"status": "failed"}).status_code == 409


def test_finalize_after_failed_is_409(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_train(api)
    api.put(f"/api/v1/rft/external-runs/{run_id}/status", json={"status": "failed"})
    assert api.post("/api/v1/rft/finalize", json={"run_id": run_id, "exit_code": 0}).status_code == 409
    assert server.inspect.run(run_id)["status"] == "FAILED"


def test_unknown_runs_are_404(api: httpx.Client) -> None:
    assert api.post("/api/v1/rft/finalize", json={"run_id": "missing", "exit_code": 0}).status_code == 404
    assert api.put("/api/v1/rft/external-runs/missing/status", json={"status": "failed"}).status_code == 404


def test_metrics_keep_one_row_per_step_merging_later_values(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_train(api)
    rows = [
        {"loss": 0.5, "reward": 0.1, "step": 2, "_timestamp": 100.0},
        {"loss": 0.4, "step": 1, "_timestamp": 101.0},
        {"loss": 0.3, "entropy": 0.9, "step": 2, "_timestamp": 102.0},
        {"loss": 0.3, "entropy": 0.9, "step": 2, "_timestamp": 102.0},
    ]
    for metrics in rows:
        assert api.post("/api/v1/rft/metrics", json={"run_id": run_id, "metrics": metrics}).status_code == 200
    assert server.inspect.run(run_id)["metric_rows"] == [
        {"loss": 0.4, "step": 1, "_timestamp": 101.0},
        {"loss": 0.3, "reward": 0.1, "step": 2, "_timestamp": 102.0, "entropy": 0.9},
    ]


def test_metrics_rows_without_a_step_are_appended(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_train(api)
    for timestamp in (5.0, 6.0):
        api.post("/api/v1/rft/metrics", json={"run_id": run_id, "metrics": {"gpu": 1, "_timestamp": timestamp}})
    api.post("/api/v1/rft/metrics", json={"run_id": run_id, "metrics": {"loss": 1, "step": 0}})
    rows = server.inspect.run(run_id)["metric_rows"]
    assert [row.get("step") for row in rows] == [0, None, None]
    assert [row.get("_timestamp") for row in rows[1:]] == [5.0, 6.0]


def test_a_non_integer_step_is_422(api: httpx.Client) -> None:
    run_id = create_train(api)
    response = api.post("/api/v1/rft/metrics", json={"run_id": run_id, "metrics": {"step": "ten"}})
    assert response.status_code == 422


def test_presign_mints_a_fresh_key_per_call(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_train(api)
    first, second = _presign(api, run_id, 10), _presign(api, run_id, 10)
    assert first["s3Key"] != second["s3Key"]
    assert str(first["s3Key"]).startswith(f"rft-samples/{run_id}/step_10_")
    assert first["expiresIn"] == 900
    assert str(first["presignedUrl"]).startswith(f"{server.url}/_objects/")


def test_confirmed_parquet_rows_are_readable_per_step(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_train(api)
    key = _store(api, run_id, 10)
    assert server.inspect.steps(run_id) == [
        {"step": 10, "num_rows": 3, "objects": [{"key": key, "rows": 3, "bytes": len(PARQUET)}]}
    ]
    rows = server.inspect.step_rows(run_id, 10)
    assert rows["total"] == 3
    assert rows["items"] == fixture_json("train/step-10.parquet.rows.json")
    assert server.inspect.step_rows(run_id, 10, offset=2, limit=5)["items"] == rows["items"][2:]
    assert server.inspect.run(run_id)["objects"][0]["key"] == key


def test_confirm_is_idempotent_per_key(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_train(api)
    key = _store(api, run_id, 10)
    again = api.post("/api/v1/rft/samples/confirm", json={"run_id": run_id, "step": 10, "s3_key": key})
    assert again.status_code == 200
    assert len(server.inspect.run(run_id)["objects"]) == 1
    assert server.inspect.step_rows(run_id, 10)["total"] == 3


def test_confirm_refuses_keys_that_were_not_uploaded_or_belong_elsewhere(api: httpx.Client) -> None:
    run_id = create_train(api)
    unused = _presign(api, run_id, 3)["s3Key"]
    confirm = "/api/v1/rft/samples/confirm"
    assert api.post(confirm, json={"run_id": run_id, "step": 3, "s3_key": unused}).status_code == 400
    key = _store(api, run_id, 4, confirm=False)
    assert api.post(confirm, json={"run_id": run_id, "step": 5, "s3_key": key}).status_code == 400
    other = create_train(api)
    assert api.post(confirm, json={"run_id": other, "step": 4, "s3_key": key}).status_code == 400


def test_objects_are_additive_per_step_by_default(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_train(api)
    keys = [_store(api, run_id, 10), _store(api, run_id, 10), _store(api, run_id, 11)]
    steps = server.inspect.steps(run_id)
    assert [(s["step"], s["num_rows"], [o["key"] for o in s["objects"]]) for s in steps] == [
        (10, 6, keys[:2]),
        (11, 3, keys[2:]),
    ]
    assert server.inspect.step_rows(run_id, 10)["total"] == 6


def test_single_object_mode_keeps_the_latest_confirmed_object_of_a_step(
    api: httpx.Client, server: LocalPlatform
) -> None:
    server.inspect.settings(object_mode="single")
    run_id = create_train(api)
    _store(api, run_id, 10)
    latest = _store(api, run_id, 10)
    assert [o["key"] for o in server.inspect.run(run_id)["objects"]] == [latest]
    assert server.inspect.step_rows(run_id, 10)["total"] == 3


def test_an_expired_url_is_403_and_stores_nothing(api: httpx.Client, server: LocalPlatform) -> None:
    server.inspect.settings(presign_ttl=1)
    run_id = create_train(api)
    presigned = _presign(api, run_id, 1)
    url = str(presigned["presignedUrl"])
    expires = int(parse_qs(urlsplit(url).query)["expires"][0])
    time.sleep(max(0.0, expires - time.time()) + 0.05)
    assert httpx.put(url, content=PARQUET, timeout=TIMEOUT).status_code == 403
    body = {"run_id": run_id, "step": 1, "s3_key": presigned["s3Key"]}
    assert api.post("/api/v1/rft/samples/confirm", json=body).status_code == 400


def test_a_forged_signature_or_a_swapped_key_is_403(api: httpx.Client) -> None:
    run_id = create_train(api)
    url = str(_presign(api, run_id, 1)["presignedUrl"])
    forged = url[:-4] + ("0000" if not url.endswith("0000") else "1111")
    assert httpx.put(forged, content=PARQUET, timeout=TIMEOUT).status_code == 403
    other_key = str(_presign(api, run_id, 2)["s3Key"])
    swapped = url.replace(urlsplit(url).path, f"/_objects/{other_key}")
    assert httpx.put(swapped, content=PARQUET, timeout=TIMEOUT).status_code == 403
    assert httpx.put(url.split("?")[0], content=PARQUET, timeout=TIMEOUT).status_code == 403
