"""Gateway scaling behind the real agent Collector (``collector-config/agent.yaml``, load balancing on ``run.id``):
1, 2, 4 gateway processes, the same pre-encoded runs sent to the agent over OTLP/gRPC, timed until every gateway
closed every run it received (all delivered to the platform)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import grpc

from prime_otel.testing import LocalPlatform
from tests._collector import BINARY as COLLECTOR
from tests._collector import agent
from tests.gateway._gateway import Gateway

TOKEN = "bench-fleet-token"
_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_POSTERS = 4
_WAIT_SECONDS = 600.0


def collector_built() -> bool:
    return COLLECTOR.exists()


def scale(
    platform: LocalPlatform,
    folder: Path,
    gateways: int,
    runs: Sequence[tuple[str, list[bytes], bytes]],
    cpu_of: Callable[[int], float],
    stored: Callable[[str], tuple[int, int]],
    episodes_per_run: int,
    platform_pid: int | None = None,
) -> dict[str, Any]:
    """``runs``: (run id, raw OTLP request bodies, end marker body). Every run must land whole. ``platform_pid``:
    the local platform's process, whose CPU is reported too (it shares the cores)."""
    with ExitStack() as stack:
        fleet = [
            stack.enter_context(
                Gateway(platform, folder / f"gateway-{gateways}-{n}", "--lease-seconds", "120", tokens=[TOKEN])
            )
            for n in range(gateways)
        ]
        log = folder / "collector.log"
        collector = stack.enter_context(agent([g.grpc_port for g in fleet], log, TOKEN, binary=COLLECTOR))
        channel = grpc.insecure_channel(
            f"127.0.0.1:{collector.grpc_port}", options=[("grpc.max_send_message_length", 128 * 1024 * 1024)]
        )
        stack.callback(channel.close)
        export = channel.unary_unary(_EXPORT, request_serializer=None, response_deserializer=None)
        before = [cpu_of(gateway.process.pid) for gateway in fleet]
        collector_before = cpu_of(collector.pid)
        platform_before = cpu_of(platform_pid) if platform_pid is not None else 0.0
        started = time.perf_counter()
        with ThreadPoolExecutor(_POSTERS) as pool:
            list(pool.map(lambda body: export(body, timeout=120), [b for _, bodies, _ in runs for b in bodies]))
            list(pool.map(lambda body: export(body, timeout=120), [marker for _, _, marker in runs]))
        where = _wait_all_closed(fleet, [run_id for run_id, _, _ in runs])
        wall = time.perf_counter() - started
        cpu = [cpu_of(gateway.process.pid) - was for gateway, was in zip(fleet, before, strict=True)]
        collector_cpu = cpu_of(collector.pid) - collector_before
        platform_cpu = cpu_of(platform_pid) - platform_before if platform_pid is not None else None
    for run_id, _, _ in runs:
        landed = stored(run_id)
        assert landed == (episodes_per_run, episodes_per_run), f"run {run_id} stored {landed}"
    total = len(runs) * episodes_per_run
    return {
        "gateways": gateways,
        "runs": len(runs),
        "episodes": total,
        "wall_s": wall,
        "episodes_per_second": total / wall,
        "episodes_per_second_per_gateway": total / wall / gateways,
        "runs_per_gateway": [sum(1 for g in where.values() if g == n) for n in range(gateways)],
        "gateway_cpu_s": cpu,
        "gateway_cpu_ms_per_episode": sum(cpu) / total * 1000,
        "collector_cpu_ms_per_episode": collector_cpu / total * 1000,
        "platform_cpu_ms_per_episode": platform_cpu / total * 1000 if platform_cpu is not None else None,
    }


def _wait_all_closed(fleet: Sequence[Gateway], run_ids: Sequence[str]) -> dict[str, int]:
    """Which gateway closed each run (completed, nothing missing), once all are closed."""
    deadline = time.monotonic() + _WAIT_SECONDS
    while time.monotonic() < deadline:
        closed: dict[str, int] = {}
        for number, gateway in enumerate(fleet):
            for run_id, run in gateway.runs().items():
                if run["state"] == "closed":
                    assert run["status"] == "completed" and run["missing"] == 0, run
                    closed[run_id] = number
        if all(run_id in closed for run_id in run_ids):
            return closed
        time.sleep(0.2)
    raise AssertionError(f"not every run closed within {_WAIT_SECONDS:g} s")
