"""The real agent Collector (collector-config/agent.yaml, the binary ``make collector`` builds) in front of
gateway subprocesses, and the environment its producers export with."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from prime_otel.testing import LocalPlatform
from tests._collector import built_collector
from tests.gateway._gateway import Gateway, wait_for

REPO = Path(__file__).resolve().parents[2]
AGENT_CONFIG = REPO / "collector-config" / "agent.yaml"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@contextmanager
def agent_collector(
    platform: LocalPlatform, gateways: Sequence[Gateway], folder: Path, token: str
) -> Iterator[dict[str, str]]:
    """An agent Collector load balancing onto ``gateways`` with ``token``; yields the producers' environment
    (OTLP/gRPC to the agent)."""
    grpc_port, http_port = free_port(), free_port()
    endpoints = ", ".join(f"127.0.0.1:{gateway.grpc_port}" for gateway in gateways)
    env = {
        **os.environ,
        "AGENT_OTLP_GRPC_PORT": str(grpc_port),
        "AGENT_OTLP_HTTP_PORT": str(http_port),
        "AGENT_METRICS_PORT": str(free_port()),
        "GATEWAY_GRPC_ENDPOINTS": f"[{endpoints}]",
        "GATEWAY_TOKEN": token,
    }
    log_path = folder / "collector.log"
    log = log_path.open("ab")
    collector = subprocess.Popen(
        [str(built_collector()), f"--config={AGENT_CONFIG}"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        wait_for(lambda: accepts(grpc_port) or collector.poll() is not None, "the Collector to listen")
        assert collector.poll() is None, log_path.read_text()[-4000:]
        producer_env = {
            **os.environ,
            **platform.env,
            "HOME": str(folder),
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{grpc_port}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        }
        for name in ("PRIME_RUN_ID", "PRIME_RUN_OWNER_PID", "PRIME_RUN_KIND", "RANK", "WORLD_SIZE"):
            producer_env.pop(name, None)
        yield producer_env
    finally:
        collector.send_signal(signal.SIGTERM)
        try:
            collector.wait(20)
        except subprocess.TimeoutExpired:
            collector.kill()
            collector.wait(10)
        log.close()
