"""The Collector ``make collector`` builds (collector-config/dist), started on loopback ports for one test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path
from types import TracebackType

from tests._collector import built_collector
from tests.gateway._gateway import wait_for

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


class Collector:
    """``with Collector(config, log, env) as collector:`` until its OTLP/gRPC port (``AGENT_OTLP_GRPC_PORT``)
    listens; SIGTERM (which flushes its exporters) on the way out."""

    def __init__(self, config: Path, log: Path, env: dict[str, str]) -> None:
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
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    def __enter__(self) -> Collector:
        with self.log.open("ab") as out:
            self._process = subprocess.Popen(
                [str(built_collector()), f"--config={self._config}"],
                env=self._env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        process = self._process
        wait_for(lambda: _accepts(self.grpc_port) or process.poll() is not None, "the Collector to listen")
        assert process.poll() is None, self.output()
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
