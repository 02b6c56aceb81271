"""The real agent Collector (collector-config/agent.yaml, the binary ``make collector`` builds) in front of
gateway subprocesses, and the environment its producers export with."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from prime_otel.testing import LocalPlatform
from tests._collector import agent
from tests.gateway._gateway import Gateway


@contextmanager
def agent_collector(
    platform: LocalPlatform, gateways: Sequence[Gateway], folder: Path, token: str
) -> Iterator[dict[str, str]]:
    """An agent Collector load balancing onto ``gateways`` with ``token``; yields the producers' environment
    (OTLP/gRPC to the agent)."""
    with agent([gateway.grpc_port for gateway in gateways], folder / "collector.log", token) as collector:
        producer_env = {
            **os.environ,
            **platform.env,
            "HOME": str(folder),
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        }
        for name in ("PRIME_RUN_ID", "PRIME_RUN_OWNER_PID", "PRIME_RUN_KIND", "RANK", "WORLD_SIZE"):
            producer_env.pop(name, None)
        yield producer_env
