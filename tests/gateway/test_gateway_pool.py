"""Runs share the gateway's fixed delivery threads: hundreds of distinct run ids, each with records delivered,
add no thread per run to the gateway process (its thread count stays within the fixed pools)."""

from __future__ import annotations

from pathlib import Path

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from prime_otel.testing import LocalPlatform
from tests._waiting import wait_for
from tests.gateway._gateway import Gateway
from tests.gateway._producer import episode_spans, fresh_episodes, run_resource

RUNS = 150
WORKERS = 4


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count in /proc")


def test_many_open_runs_use_the_fixed_delivery_threads(platform: LocalPlatform, tmp_path: Path) -> None:
    options = ("--lease-seconds", "300", "--workers", str(WORKERS))
    with Gateway(platform, tmp_path / "gateway", *options) as gateway, httpx.Client(timeout=30) as client:
        episode = fresh_episodes("eval", 1)
        warm = encode_spans(episode_spans(episode, run_resource("pool-warm", "eval"))).SerializeToString()
        headers = {"Content-Type": "application/x-protobuf"}
        assert client.post(f"{gateway.http_url}/v1/traces", content=warm, headers=headers).status_code == 200
        wait_for(lambda: gateway.runs()["pool-warm"]["sinks"], "the first run's deliveries")
        before = threads_of(gateway.process.pid)
        for number in range(RUNS):
            body = encode_spans(episode_spans(episode, run_resource(f"pool-{number}", "eval"))).SerializeToString()
            assert client.post(f"{gateway.http_url}/v1/traces", content=body, headers=headers).status_code == 200

        def all_attempted() -> bool:
            runs = gateway.runs()
            return all(
                sum(sink["delivered"] + sink["failed"] for sink in runs[f"pool-{number}"]["sinks"].values()) > 0
                for number in range(RUNS)
            )

        wait_for(all_attempted, "every run's record to be delivered or counted failed", timeout=120)
        grown = threads_of(gateway.process.pid) - before
    assert grown < 10, f"{grown} threads more for {RUNS} more open runs"
