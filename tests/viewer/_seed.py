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
    """What the demo's training loop logs per step (loss, reward/mean, lr), plus an eval metric every 5th step."""
    loss = round(2.0 * math.exp(-step / 12) + 0.02 * ((step * 7) % 5) / 5, 6)
    row = {"loss": loss, "reward/mean": round(1 - loss / 2.5, 6), "lr": 1e-6}
    if step % 5 == 0:
        row["eval/accuracy"] = round(0.4 + step / 100, 6)
    return row


def delivery_block(episodes: int, samples: int, **losses: int) -> dict[str, Any]:
    """``prime_runs`` as the SDK adds it to an evaluation's summary: episodes written and the per-sink report."""

    def sink(delivered: int, prefix: str) -> dict[str, int]:
        counts = {"delivered": delivered, "failed": 0, "dropped": 0, "spooled": 0, "replayed": 0, "possibly_missing": 0}
        counts.update({name[len(prefix) :]: n for name, n in losses.items() if name.startswith(prefix)})
        return counts

    return {
        "traces_episodes_written": episodes,
        "delivery": {"traces": sink(episodes, "traces_"), "eval_samples": sink(samples, "samples_")},
    }


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
        self.upload(episodes, run_type, line_format="episode")

    def upload(self, records: list[dict[str, Any]], run_type: str, line_format: str = "trace") -> None:
        data = "".join(compact(record) + "\n" for record in records).encode()
        metadata = json.dumps({"schema_version": 1, "context": {"source": "prime-runs", "run_type": run_type}})
        headers = {"Idempotency-Key": f"sha256:{hashlib.sha256(data).hexdigest()}"}
        if line_format == "episode":
            headers["X-Prime-Line-Format"] = "episode"
        response = self.client.post(
            f"{self.url}/api/v1/traces",
            files={
                "metadata": (None, metadata.encode(), "application/json"),
                "traces": ("traces.jsonl", data, "application/x-ndjson"),
            },
            headers=headers,
        )
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "committed"

    def log_metrics(self, run_id: str, step: int) -> None:
        metrics = {**metric_row(step), "step": step, "_timestamp": 1_787_342_400.0 + step}
        self.call("POST", "/rft/metrics", {"run_id": run_id, "metrics": metrics})

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


def varied(episode: dict[str, Any], tag: str, *, score: float | None = None, step: int | None = None) -> dict[str, Any]:
    """A copy of a fixture episode under fresh ids (the traces service keys records by id across runs),
    optionally re-scored or dispatched at another step."""
    episode = copy.deepcopy(episode)
    episode["id"] = hashlib.md5(f"{episode['id']}-{tag}".encode()).hexdigest()
    if step is not None:
        episode["run"]["work"]["step"] = step
    for trace in episode["traces"]:
        trace["id"] = hashlib.md5(f"{trace['id']}-{tag}".encode()).hexdigest()
        if step is not None:
            trace["run"]["work"]["step"] = step
        if score is not None:
            trace["rewards"] = {name: ({**r, "score": score} if r else r) for name, r in trace["rewards"].items()}
    return episode


def varied_sample(sample: dict[str, Any], episode: dict[str, Any]) -> dict[str, Any]:
    return {**copy.deepcopy(sample), "sample_id": episode["id"], "episode_id": episode["id"]}


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
    eval_summary: dict[str, Any] = field(repr=False)
    train_id: str
    train_name: str
    train_steps: list[int]
    train_object_key: str
    train_rows: list[dict[str, Any]] = field(repr=False)
    train_episodes: list[dict[str, Any]] = field(repr=False)
    failed_id: str
    failed_summary: dict[str, Any] = field(repr=False)
    records_id: str


def seed_eval(api: PlatformAPI) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
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
    summary = {**fixture_json("eval/summary.json"), "prime_runs": delivery_block(3, 3)}
    api.call("POST", f"/evaluations/{eval_id}/finalize", {"metrics": summary})
    api.wait_status(eval_id, "COMPLETED")
    return created, samples, episodes, summary


def seed_training(api: PlatformAPI) -> tuple[str, str, list[int], str, list[dict[str, Any]]]:
    """A finished run like the demo's: per-step metrics, a Parquet object at step 10, episodes from several steps."""
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
        api.log_metrics(run_id, step)
    presigned = api.call("POST", "/rft/samples/presign", {"run_id": run_id, "step": 10})["data"]
    parquet = (FIXTURES / "train/step-10.parquet").read_bytes()
    put = httpx.put(presigned["presignedUrl"], content=parquet, headers={"Content-Type": "application/parquet"})
    assert put.is_success, put.text
    api.call("POST", "/rft/samples/confirm", {"run_id": run_id, "step": 10, "s3_key": presigned["s3Key"]})
    fixtures = [stamped(fixture_json(f"train/episode-{n}.stamped.json"), run_id, "train") for n in (1, 2, 3)]
    episodes = list(fixtures)
    for step in range(1, 5):
        episodes += [varied(e, f"step{step}", step=step, score=float(step % 2)) for e in fixtures]
    api.upload_episodes(episodes, "train")
    api.call("POST", "/rft/finalize", {"run_id": run_id, "exit_code": 0})
    return run_id, name, steps, presigned["s3Key"], episodes


def seed_failed(api: PlatformAPI) -> tuple[str, dict[str, Any]]:
    """An evaluation that crashed after some episodes, with records lost on the way."""
    eval_id = str(api.create_eval(FAILED_NAME, {"rollouts_per_example": 4})["evaluation_id"])
    ok, failing = (fixture_json(f"eval/episode-{n}.stamped.json") for n in (1, 2))
    episodes = [stamped(varied(e, "failed"), eval_id, "eval") for e in (ok, failing)]
    samples = fixture_json("eval/samples.json")["samples"][:2]
    api.push_samples(eval_id, [varied_sample(s, e) for s, e in zip(samples, episodes, strict=True)])
    api.upload_episodes(episodes[1:], "eval")
    summary = {
        "avg_reward": 0.5,
        "avg_metrics": {"correct": 1.0, "num_turns": 1.0},
        "avg_error": 0.5,
        "prime_runs": delivery_block(1, 2, traces_failed=1, traces_possibly_missing=1),
    }
    api.call("PUT", f"/evaluations/{eval_id}", {"metrics": summary})
    api.call("PUT", f"/evaluations/{eval_id}", {"status": "FAILED", "error_message": FAILED_MESSAGE})
    return eval_id, summary


# Records that are not verifiers episodes: a bare trace with an OpenAI-style `messages` list, and an
# episode whose member trace carries OpenTelemetry GenAI messages ({role, parts}).
CHAT_TRACE: dict[str, Any] = {
    "id": "json-trace-1",
    "env": {"id": "weather-tools"},
    "ok": True,
    "reward": 0.25,
    "messages": [
        {"role": "system", "content": "You answer with the weather tool."},
        {"role": "user", "content": "Is it raining in Lisbon?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_w1", "content": '{"rain": false, "temp_c": 21}'},
        {"role": "assistant", "content": "No, it is dry and 21 °C in Lisbon."},
    ],
}
GENAI_EPISODE: dict[str, Any] = {
    "id": "json-episode-1",
    "env": {"id": "weather-tools"},
    "ok": False,
    "errors": [{"type": "ToolError", "message": "get_forecast timed out"}],
    "traces": [
        {
            "id": "json-genai-trace-1",
            "gen_ai.request.model": "gpt-4.1-mini",
            "gen_ai.usage.input_tokens": 52,
            "gen_ai.usage.output_tokens": 17,
            "gen_ai.input.messages": [
                {"role": "system", "parts": [{"type": "text", "content": "Plan the user's day."}]},
                {"role": "user", "parts": [{"type": "text", "content": "Do I need an umbrella in Porto tomorrow?"}]},
            ],
            "gen_ai.output.messages": [
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "reasoning", "content": "I should look up tomorrow's forecast."},
                        {"type": "tool_call", "id": "call_f1", "name": "get_forecast", "arguments": {"city": "Porto"}},
                    ],
                    "finish_reason": "tool_call",
                }
            ],
        }
    ],
}


def seed_json_records(api: PlatformAPI) -> str:
    eval_id = str(api.create_eval("json-records", {"rollouts_per_example": 1}, env="weather-tools")["evaluation_id"])
    run = {"type": "eval", "id": eval_id}
    api.upload([{**CHAT_TRACE, "run": run}], "eval")
    episode = {**GENAI_EPISODE, "run": run, "traces": [{**t, "run": run} for t in GENAI_EPISODE["traces"]]}
    api.upload_episodes([episode], "eval")
    api.call("POST", f"/evaluations/{eval_id}/finalize", {"metrics": {"avg_reward": 0.25}})
    return eval_id


def seed_all(api: PlatformAPI) -> Seeded:
    failed_id, failed_summary = seed_failed(api)
    records_id = seed_json_records(api)
    train_id, train_name, steps, object_key, train_episodes = seed_training(api)
    created, samples, episodes, summary = seed_eval(api)
    return Seeded(
        url=api.url,
        api_key=api.api_key,
        eval_id=created["evaluation_id"],
        eval_name=created["name"],
        eval_viewer_url=created["viewer_url"],
        eval_samples=samples,
        eval_episodes=episodes,
        eval_summary=summary,
        train_id=train_id,
        train_name=train_name,
        train_steps=steps,
        train_object_key=object_key,
        train_rows=fixture_json("train/step-10.parquet.rows.json"),
        train_episodes=train_episodes,
        failed_id=failed_id,
        failed_summary=failed_summary,
        records_id=records_id,
    )
