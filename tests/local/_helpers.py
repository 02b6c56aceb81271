"""Request builders shared by the local platform tests."""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TIMEOUT = 30.0


def fixture_json(relative: str) -> Any:
    return json.loads((FIXTURES / relative).read_text())


def jsonl(records: Iterable[Mapping[str, Any]]) -> bytes:
    return b"".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for r in records)


def digest_key(body: bytes) -> str:
    return f"sha256:{hashlib.sha256(body).hexdigest()}"


def upload(
    client: httpx.Client,
    body: bytes,
    *,
    episodes: bool = True,
    compress: bool = True,
    key: str | None = None,
    team: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> httpx.Response:
    """A Prime Traces upload shaped like prime-traces 0.0.10 sends it."""
    metadata = json.dumps({"schema_version": 1, "context": {"source": "tests"}}).encode()
    if compress:
        part: tuple[Any, ...] = (
            "traces.jsonl",
            gzip.compress(body, mtime=0),
            "application/x-ndjson",
            {"Content-Encoding": "gzip"},
        )
    else:
        part = ("traces.jsonl", body, "application/x-ndjson")
    sent = {"Idempotency-Key": key or digest_key(body), **(headers or {})}
    if episodes:
        sent["X-Prime-Line-Format"] = "episode"
    if team:
        sent["X-Prime-Team-ID"] = team
    files = {"metadata": (None, metadata, "application/json"), "traces": part}
    return client.post("/api/v1/traces", files=files, headers=sent)


def create_eval(client: httpx.Client, **body: Any) -> str:
    payload = {"name": "eval-under-test", "environments": [{"id": "env_1"}], "tags": [], **body}
    response = client.post("/api/v1/evaluations/", json=payload)
    assert response.status_code == 201, response.text
    return str(response.json()["evaluation_id"])


def create_train(client: httpx.Client, **body: Any) -> str:
    payload = {"base_model": "Qwen/Qwen3-4B", "max_steps": 10, "environments": [{"id": "gsm8k"}], "team_id": "team_abc"}
    response = client.post("/api/v1/rft/external-runs", json={**payload, **body})
    assert response.status_code == 201, response.text
    return str(response.json()["run"]["id"])


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()
