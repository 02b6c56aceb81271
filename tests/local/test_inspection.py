"""The inspection API under /_local/ that the viewer and tests read (exact shapes)."""

from __future__ import annotations

import httpx
import pytest

from prime_otel.testing import LocalPlatform

from ._helpers import FIXTURES, TIMEOUT, create_eval, create_train, fixture_json, jsonl, upload

LIST_KEYS = {"id", "kind", "name", "status", "created_at", "model", "num_samples", "num_episodes", "num_traces"}
DETAIL_KEYS = LIST_KEYS | {
    "error_message",
    "updated_at",
    "framework",
    "team_id",
    "environments",
    "tags",
    "hosted",
    "metadata",
    "run_config",
    "config_source",
    "summary",
    "metric_rows",
    "objects",
    "requests",
}


def test_runs_are_listed_newest_first_with_their_counts(api: httpx.Client, server: LocalPlatform) -> None:
    evaluation_id = create_eval(api, model_name="m-eval")
    api.post(f"/api/v1/evaluations/{evaluation_id}/samples", json=fixture_json("eval/samples.json"))
    run_id = create_train(api)
    listed = server.inspect.runs()
    assert [run["id"] for run in listed[:2]] == [run_id, evaluation_id]
    assert all(set(run) == LIST_KEYS for run in listed)
    train, evaluation = listed[0], listed[1]
    assert (train["kind"], train["status"], train["model"]) == ("train", "RUNNING", "Qwen/Qwen3-4B")
    assert (evaluation["kind"], evaluation["model"], evaluation["num_samples"]) == ("eval", "m-eval", 3)


def test_an_evaluation_in_detail(api: httpx.Client, server: LocalPlatform) -> None:
    source = {"format": "toml", "text": "[eval]\nn = 3\n", "filename": "eval.toml"}
    evaluation_id = create_eval(api, framework="verifiers", tags=["a"], metadata={"config_source": source})
    api.put(f"/api/v1/evaluations/{evaluation_id}", json={"metrics": {"avg_reward": 0.5}})
    detail = server.inspect.run(evaluation_id)
    assert set(detail) >= DETAIL_KEYS
    assert (detail["framework"], detail["tags"], detail["hosted"]) == ("verifiers", ["a"], False)
    assert (detail["config_source"], detail["summary"], detail["run_config"]) == (source, {"avg_reward": 0.5}, None)
    assert detail["requests"] == {"POST /api/v1/evaluations/": 1, "PUT /api/v1/evaluations/{evaluation_id}": 1}


def test_a_training_run_in_detail(api: httpx.Client, server: LocalPlatform) -> None:
    source = {"format": "yaml", "text": "steps: 10\n"}
    run_id = create_train(api, run_config={"steps": 10, "config_source": source})
    detail = server.inspect.run(run_id)
    assert (detail["run_config"], detail["config_source"]) == ({"steps": 10, "config_source": source}, source)
    assert (detail["metadata"], detail["summary"], detail["metric_rows"], detail["objects"]) == (None, None, [], [])


@pytest.mark.parametrize("suffix", ["", "/samples", "/episodes", "/steps", "/steps/1/rows"])
def test_unknown_runs_are_404(api: httpx.Client, suffix: str) -> None:
    response = api.get(f"/_local/runs/missing{suffix}")
    assert response.status_code == 404
    assert "detail" in response.json()


def test_samples_and_episodes_page_by_offset(api: httpx.Client, server: LocalPlatform) -> None:
    evaluation_id = create_eval(api)
    rows = fixture_json("eval/samples.json")["samples"]
    api.post(f"/api/v1/evaluations/{evaluation_id}/samples", json={"samples": rows})
    assert server.inspect.samples(evaluation_id, offset=1, limit=1) == {"total": 3, "items": rows[1:2]}
    traces = [{"id": f"{evaluation_id}-t{i}", "run": {"id": evaluation_id}} for i in range(3)]
    upload(api, jsonl(traces), episodes=False)
    assert server.inspect.episodes(evaluation_id, offset=2, limit=5) == {"total": 3, "items": traces[2:]}


def test_requests_are_recorded_newest_last_without_credentials(api: httpx.Client, server: LocalPlatform) -> None:
    evaluation_id = create_eval(api, name="recorded")
    api.put(f"/api/v1/evaluations/{evaluation_id}", json={"metadata": {"k": "v"}})
    recorded = server.inspect.requests(limit=5)
    assert server.api_key not in str(recorded)
    create, update = recorded[-2:]
    assert (create["method"], create["route"], create["status"]) == ("POST", "/api/v1/evaluations/", 201)
    assert create["body"]["name"] == "recorded"
    assert create["response"]["evaluation_id"] == evaluation_id
    assert create["headers"]["authorization"] == "Bearer <redacted>"
    assert (update["path"], update["route"]) == (
        f"/api/v1/evaluations/{evaluation_id}",
        "/api/v1/evaluations/{evaluation_id}",
    )
    assert update["body"] == {"metadata": {"k": "v"}}
    assert create["seq"] < update["seq"]


def test_requests_can_be_filtered_by_run_and_show_decoded_uploads(api: httpx.Client, server: LocalPlatform) -> None:
    run_id = create_train(api)
    presigned = api.post("/api/v1/rft/samples/presign", json={"run_id": run_id, "step": 1}).json()["data"]
    parquet = (FIXTURES / "train/step-10.parquet").read_bytes()
    httpx.put(
        presigned["presignedUrl"], content=parquet, headers={"Content-Type": "application/parquet"}, timeout=TIMEOUT
    )
    trace = {"id": f"{run_id}-trace", "run": {"id": run_id, "type": "train"}}
    upload(api, jsonl([trace]), episodes=False, team="team_abc")
    recorded = server.inspect.requests(run_id=run_id)
    assert [r["route"] for r in recorded] == [
        "/api/v1/rft/external-runs",
        "/api/v1/rft/samples/presign",
        "/_objects/{key:path}",
        "/api/v1/traces",
    ]
    assert recorded[2]["body"] == f"<{len(parquet)} bytes of Parquet>"
    traces_body = recorded[3]["body"]
    assert traces_body["traces"]["jsonl_lines"] == [trace]
    assert traces_body["traces"]["part_headers"]["content-encoding"] == "gzip"
    assert traces_body["metadata"]["json"]["schema_version"] == 1
    assert recorded[3]["headers"]["x-prime-team-id"] == "team_abc"


def test_local_reads_are_not_recorded_but_local_writes_are(server: LocalPlatform) -> None:
    server.inspect.runs()
    server.inspect.publish_environment("owner", "recorded-env")
    last = server.inspect.requests(limit=1)[-1]
    assert (last["method"], last["path"]) == ("POST", "/_local/environments")
