"""The real Collector, for the tests and benchmarks that run one: the binary (``make test`` builds it before the
tests, visibly; a test that needs it asks here at setup, never at collection time, so a binary built earlier in the
same session counts; the build is a no-op when the binary matches collector-config/manifest.yaml), a Collector
process on free loopback ports, and the agent configuration load balancing onto gateways."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

import pytest

from prime_otel._processes import terminate
from tests._waiting import wait_for

CONFIG_DIR = Path(__file__).resolve().parents[1] / "collector-config"
BINARY = CONFIG_DIR / "dist" / "otelcol-prime"
AGENT_CONFIG = CONFIG_DIR / "agent.yaml"
BUILD_TIMEOUT_S = 1700  # from nothing: about 10 minutes on 2 cores
_STOP_SECONDS = 20


def built_collector() -> Path:
    """The built binary, building it when go is installed; skips the test otherwise."""
    if shutil.which("go") is None:
        pytest.skip("go is not installed, so collector-config/build.sh cannot build the Collector")
    result = subprocess.run(
        ["bash", str(CONFIG_DIR / "build.sh")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, f"collector-config/build.sh failed:\n{result.stderr[-4000:]}"
    return BINARY


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


class Collector:
    """``with Collector(config, log, env) as collector:`` until its OTLP/gRPC port (``AGENT_OTLP_GRPC_PORT``)
    listens; SIGTERM (which flushes its exporters) on the way out. ``binary``: the Collector to run (default: the
    one ``built_collector`` builds, skipping the test without go)."""

    def __init__(self, config: Path, log: Path, env: Mapping[str, str], *, binary: Path | None = None) -> None:
        self.grpc_port = free_port()
        self.log = log
        self._env = {
            **os.environ,
            **env,
            "AGENT_OTLP_GRPC_PORT": str(self.grpc_port),
            "AGENT_OTLP_HTTP_PORT": str(free_port()),
            "AGENT_METRICS_PORT": str(free_port()),
        }
        self._config = config
        self._binary = binary
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    @property
    def pid(self) -> int:
        assert self._process is not None, "the Collector was not started"
        return self._process.pid

    def __enter__(self) -> Collector:
        binary = self._binary or built_collector()
        with self.log.open("ab") as out:
            self._process = subprocess.Popen(
                [str(binary), f"--config={self._config}"], env=self._env, stdout=out, stderr=subprocess.STDOUT
            )
        process = self._process
        wait_for(lambda: accepts(self.grpc_port) or process.poll() is not None, "the Collector to listen")
        assert process.poll() is None, self.output()[-4000:]
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self._process is not None:
            terminate(self._process, _STOP_SECONDS)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def agent(
    gateway_grpc_ports: Sequence[int], log: Path, token: str | None = None, *, binary: Path | None = None
) -> Collector:
    """The agent Collector (collector-config/agent.yaml: ``load_balancing`` on ``run.id``) in front of the gateways
    listening on ``gateway_grpc_ports``, sending ``token`` (none: the gateways take anonymous senders)."""
    endpoints = ", ".join(f"127.0.0.1:{port}" for port in gateway_grpc_ports)
    env = {"GATEWAY_GRPC_ENDPOINTS": f"[{endpoints}]"}
    if token is not None:
        env["GATEWAY_TOKEN"] = token
    return Collector(AGENT_CONFIG, log, env, binary=binary)
