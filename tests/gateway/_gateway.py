"""A ``prime-otel gateway`` subprocess pointed at a local platform, its ``/runs`` status, and the runs a producer
registers before sending over OTLP (shared by the gateway tests and their conftest)."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from prime_otel._backends import EvalBackend, RunSpec, TrainingBackend
from prime_otel._processes import terminate
from prime_otel._types import EnvironmentRef, RunKind
from prime_otel.client import EvaluationsAPI, PlatformHTTP, TrainingRunsAPI
from prime_otel.gateway._auth import TOKENS_ENV
from prime_otel.testing import LocalPlatform

TEAM = "team_gateway"
LEASE_SECONDS = 2
FAST_LIMITS = {"metrics_rate_limit": 100_000, "samples_rate_limit": 100_000}
START_SECONDS = 60.0
STOP_SECONDS = 20.0
WAIT_SECONDS = 60.0


class Gateway:
    """``tokens``: the accepted bearer tokens (none: ``--no-auth``), the first one used for ``/runs``; ``ca``: the
    certificate to trust when the options turn TLS on."""

    def __init__(
        self, platform: LocalPlatform, folder: Path, *options: str, tokens: Sequence[str] = (), ca: Path | None = None
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.token = tokens[0] if tokens else None
        self.verify: bool | ssl.SSLContext = ssl.create_default_context(cafile=str(ca)) if ca is not None else True
        self.folder = folder
        self.log_file = folder / "gateway.log"
        ready = folder / "ready.json"
        ready.unlink(missing_ok=True)
        command = [sys.executable, "-m", "prime_otel.cli", "gateway", "--http-port", "0", "--grpc-port", "0"]
        command += ["--ready-file", str(ready), *options]
        env = {**os.environ, **platform.env, "HOME": str(folder)}
        env.pop(TOKENS_ENV, None)
        if tokens:
            env[TOKENS_ENV] = ",".join(tokens)
        else:
            command.append("--no-auth")
        for name in ("PRIME_RUN_ID", "PRIME_RUN_OWNER_PID", "PRIME_RUN_KIND", "PRIME_TRACES_OPT_OUT"):
            env.pop(name, None)
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
            )
        info = self._wait_ready(ready)
        self.http_url: str = info["http_url"]
        self.grpc_endpoint: str = info["grpc_endpoint"]
        self.grpc_port: int = info["grpc_port"]

    def _wait_ready(self, ready: Path) -> dict[str, Any]:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if ready.exists():
                return dict(json.loads(ready.read_text()))
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the gateway did not start:\n{self.log()}")

    def log(self) -> str:
        return self.log_file.read_text(errors="replace")[-6000:] if self.log_file.exists() else ""

    @property
    def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"} if self.token is not None else {}

    def runs(self) -> dict[str, dict[str, Any]]:
        answer = httpx.get(f"{self.http_url}/runs", timeout=10, headers=self.headers, verify=self.verify)
        answer.raise_for_status()
        return {run["run_id"]: run for run in answer.json()}

    def wait_closed(self, run_id: str, timeout: float = WAIT_SECONDS) -> dict[str, Any]:
        """The run's status once the gateway closed it (bounded wait)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.runs().get(run_id)
            if run is not None and run["state"] == "closed":
                return run
            time.sleep(0.1)
        raise AssertionError(
            f"run {run_id} was not closed within {timeout:g} s: {self.runs().get(run_id)}\n{self.log()}"
        )

    def stop(self) -> None:
        terminate(self.process, STOP_SECONDS)

    def __enter__(self) -> Gateway:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def create_run(
    platform: LocalPlatform,
    kind: RunKind,
    name: str,
    *,
    environment: str = "gsm8k",
    model: str = "Qwen/Qwen3-8B",
    team_id: str | None = TEAM,
) -> str:
    """Registers a run the way a producer does before sending over OTLP."""
    http = PlatformHTTP(api_key=platform.api_key, base_url=platform.url)
    try:
        spec = RunSpec(
            kind=kind,
            name=name,
            environments=[EnvironmentRef.coerce(environment)],
            model=model,
            framework="verifiers",
            description=None,
            tags=[],
            config={},
            team_id=team_id,
        )
        backend = EvalBackend(EvaluationsAPI(http)) if kind == "eval" else TrainingBackend(TrainingRunsAPI(http))
        return backend.create(spec).id
    finally:
        http.close()
