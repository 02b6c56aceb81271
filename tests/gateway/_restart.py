"""A gateway with durable state, killed and started again, as the restart tests drive it: records sent as
``init(transport="otlp")`` sends them, and the platform's request log read to time a kill."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource

from prime_otel.exporters.otlp import OtlpRecordSink
from prime_otel.records import RecordSpan
from prime_otel.testing import LocalPlatform
from tests.gateway._gateway import Gateway
from tests.gateway._producer import end_marker

TOKEN = "exactly-once-token-5e2a"
AUTH = {"authorization": f"Bearer {TOKEN}"}
HOLD_SECONDS = 120.0


def start(platform: LocalPlatform, folder: Path, state: Path) -> Gateway:
    options = ("--lease-seconds", "60", "--state-dir", str(state), "--samples-step-interval", "1")
    return Gateway(platform, folder, *options, tokens=(TOKEN,))


def send(gateway: Gateway, resource: Resource, episodes: list[Any]) -> None:
    """The records as ``init(transport="otlp")`` sends them (the record once, no rows)."""
    spans = [RecordSpan(episode, resource, time.time_ns()) for episode in episodes]
    body = OtlpRecordSink(None, resource).encode_request(spans)  # type: ignore[arg-type]
    post(gateway, body)


def post(gateway: Gateway, body: bytes) -> None:
    headers = {"Content-Type": "application/x-protobuf", **AUTH}
    httpx.post(f"{gateway.http_url}/v1/traces", content=body, headers=headers, timeout=30).raise_for_status()


def end(gateway: Gateway, resource: Resource, episodes: int) -> None:
    post(gateway, encode_spans([end_marker(resource, episodes=episodes)]).SerializeToString())


def requests_to(platform: LocalPlatform, run_id: str, path_end: str) -> list[dict[str, Any]]:
    return [r for r in platform.inspect.requests(limit=500, run_id=run_id) if r["path"].endswith(path_end)]


def answered(platform: LocalPlatform, run_id: str, path_end: str, count: int) -> bool:
    return sum(1 for r in requests_to(platform, run_id, path_end) if r["status"] == 200) >= count


def held(platform: LocalPlatform, run_id: str, path_end: str) -> bool:
    """The platform applied the request (it answered 200 internally) and holds its answer back."""
    return any(
        r.get("fault", {}).get("action") == "hold_after" and r["fault"].get("handled_status") == 200
        for r in requests_to(platform, run_id, path_end)
    )


def kill(gateway: Gateway) -> None:
    gateway.process.send_signal(signal.SIGKILL)
    gateway.process.wait(10)
    gateway.stop()
