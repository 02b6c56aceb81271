"""Fills a local platform through its producer-facing HTTP API, the way the released SDK does."""

from __future__ import annotations

import copy
import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WAIT_S = 15.0

EVAL_TOML = (
    "# launched with: prime eval run eval.toml\n"
    'model = "Qwen/Qwen3-8B"\n'
    "rollouts_per_example = 1\n"
    "\n"
    "[[env]]\n"
    'id = "gsm8k"  # <b>not markup</b> & "quotes"\n'
    "\targs = { split = 'test', n = 3 }\n"
    "\n"
    "[sampling]\n"
    "temperature = 0.7   \n"
    "max_tokens = 2048\n"
)
FAILED_NAME = "crash <img src=x onerror=\"document.title='pwned'\"> <b>run</b>"
FAILED_MESSAGE = "crashed: RuntimeError: reward server unreachable\n  <script>alert(1)</script>"


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def metric_row(step: int) -> dict[str, float]:
    row = {"reward": round(0.3 + 0.5 * (1 - math.exp(-step / 8)), 6), "loss": round(2.0 * math.exp(-step / 10), 6)}
    if step % 5 == 0:
        row["eval/accuracy"] = round(0.4 + step / 100, 6)
    return row


class PlatformAPI:
    """The producer-facing API of the local platform, spoken as the released SDK speaks it."""

    def __init__(self, url: str, api_key: str) -> None:
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.client = httpx.Client(
            base_url=f"{self.url}/api/v1", headers={"Authorization": f"Bearer {api_key}"}, timeout=30.0
        )

    def close(self) -> None:
        self.client.close()

    def call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        content = compact(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else {}
        response = self.client.request(method, path, content=content, headers=headers)
        assert response.is_success, f"{method} {path} -> {response.status_code} {response.text}"
        return response.json() if response.content else {}

    def environment_id(self, name: str) -> str:
        return str(self.call("POST", "/environmentshub/resolve", {"name": name})["data"]["id"])

    def create_eval(self, name: str, metadata: dict[str, Any], env: str = "gsm8k") -> dict[str, Any]:
        body = {
            "name": name,
            "environments": [{"id": self.environment_id(env)}],
            "tags": ["viewer", "gsm8k"],
            "model_name": "Qwen/Qwen3-8B",
            "dataset": env,
            "framework": "verifiers",
            "metadata": metadata,
        }
        return self.call("POST", "/evaluations/", body)

    def push_samples(self, eval_id: str, rows: list[dict[str, Any]]) -> None:
        self.call("POST", f"/evaluations/{eval_id}/samples", {"samples": rows})

    def upload_episodes(self, episodes: list[dict[str, Any]], run_type: str) -> None:
        data = "".join(compact(episode) + "\n" for episode in episodes).encode()
        metadata = json.dumps({"schema_version": 1, "context": {"source": "prime-runs", "run_type": run_type}})
        response = self.client.post(
            f"{self.url}/api/v1/traces",
            files={
                "metadata": (None, metadata.encode(), "application/json"),
                "traces": ("traces.jsonl", data, "application/x-ndjson"),
            },
            headers={
                "Idempotency-Key": f"sha256:{hashlib.sha256(data).hexdigest()}",
                "X-Prime-Line-Format": "episode",
            },
        )
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "committed"

    def wait_status(self, run_id: str, wanted: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while True:
            response = self.client.get(f"{self.url}/_local/runs/{run_id}")
            response.raise_for_status()
            if response.json()["status"] == wanted or time.monotonic() > deadline:
                assert response.json()["status"] == wanted
                return
            time.sleep(0.1)


def stamped(episode: dict[str, Any], run_id: str, run_type: str) -> dict[str, Any]:
    """The fixture episode re-stamped for the run the local platform created (envelope and member traces)."""
    episode = copy.deepcopy(episode)
    run = {**episode.get("run", {}), "type": run_type, "id": run_id}
    episode["run"] = run
    for trace in episode["traces"]:
        trace["run"] = dict(run)
    return episode


def fixture_json(relative: str) -> Any:
    return json.loads((FIXTURES / relative).read_text())


@dataclass(frozen=True)
class Seeded:
    """What was put into the platform, so that tests compare the page with it."""

    url: str
    api_key: str
    eval_id: str
    eval_name: str
    eval_viewer_url: str
    eval_samples: list[dict[str, Any]] = field(repr=False)
    eval_episodes: list[dict[str, Any]] = field(repr=False)
    train_id: str
    train_name: str
    train_steps: list[int]
    train_object_key: str
    train_rows: list[dict[str, Any]] = field(repr=False)
    failed_id: str


def seed_eval(api: PlatformAPI) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    metadata = {
        "rollouts_per_example": 1,
        "config_source": {"format": "toml", "text": EVAL_TOML, "filename": "eval.toml"},
    }
    created = api.create_eval("gsm8k-qwen3-8b-viewer", metadata)
    eval_id = created["evaluation_id"]
    samples = fixture_json("eval/samples.json")["samples"]
    api.push_samples(eval_id, samples)
    episodes = [stamped(fixture_json(f"eval/episode-{n}.stamped.json"), eval_id, "eval") for n in (1, 2, 3)]
    api.upload_episodes(episodes, "eval")
    api.call("POST", f"/evaluations/{eval_id}/finalize", {"metrics": fixture_json("eval/summary.json")})
    api.wait_status(eval_id, "COMPLETED")
    return created, samples, episodes


def seed_training(api: PlatformAPI) -> tuple[str, str, list[int], str]:
    name = "qwen3-4b-gsm8k-grpo"
    body = {
        "base_model": "Qwen/Qwen3-4B",
        "max_steps": 30,
        "environments": [{"id": "gsm8k"}],
        "team_id": "team_abc",
        "name": name,
        "batch_size": 8,
        "rollouts_per_example": 2,
        "run_config": {"learning_rate": 1e-6, "max_steps": 30},
    }
    run_id = api.call("POST", "/rft/external-runs", body)["run"]["id"]
    steps = list(range(1, 31))
    for step in steps:
        metrics = {**metric_row(step), "step": step, "_timestamp": 1_787_342_400.0 + step}
        api.call("POST", "/rft/metrics", {"run_id": run_id, "metrics": metrics})
    presigned = api.call("POST", "/rft/samples/presign", {"run_id": run_id, "step": 10})["data"]
    parquet = (FIXTURES / "train/step-10.parquet").read_bytes()
    put = httpx.put(presigned["presignedUrl"], content=parquet, headers={"Content-Type": "application/parquet"})
    assert put.is_success, put.text
    api.call("POST", "/rft/samples/confirm", {"run_id": run_id, "step": 10, "s3_key": presigned["s3Key"]})
    episodes = [stamped(fixture_json(f"train/episode-{n}.stamped.json"), run_id, "train") for n in (1, 2, 3)]
    api.upload_episodes(episodes, "train")
    return run_id, name, steps, presigned["s3Key"]


def seed_failed(api: PlatformAPI) -> str:
    eval_id = api.create_eval(FAILED_NAME, {"rollouts_per_example": 4})["evaluation_id"]
    api.call("PUT", f"/evaluations/{eval_id}", {"status": "FAILED", "error_message": FAILED_MESSAGE})
    return str(eval_id)


def seed_all(api: PlatformAPI) -> Seeded:
    failed_id = seed_failed(api)
    train_id, train_name, steps, object_key = seed_training(api)
    created, samples, episodes = seed_eval(api)
    return Seeded(
        url=api.url,
        api_key=api.api_key,
        eval_id=created["evaluation_id"],
        eval_name=created["name"],
        eval_viewer_url=created["viewer_url"],
        eval_samples=samples,
        eval_episodes=episodes,
        train_id=train_id,
        train_name=train_name,
        train_steps=steps,
        train_object_key=object_key,
        train_rows=fixture_json("train/step-10.parquet.rows.json"),
        failed_id=failed_id,
    )
