"""Test helpers and a pytest plugin: a real local Prime platform server for your tests.

The plugin is registered through the ``pytest11`` entry point, so installing ``prime-otel[local]``
makes these fixtures available everywhere:

- ``local_platform``: a fresh server per test, in the test's ``tmp_path``. Options for the server
  come from ``@pytest.mark.local_platform(traces="disabled", samples_rate_limit=5, ...)``.
- ``local_platform_session``: one server for the whole session (reset it if you change it).

Each is a :class:`LocalPlatform`: ``url``, ``api_key``, ``env`` (the ``PRIME_*`` variables that
point an SDK at it), and ``inspect``, a client for the inspection and fault-injection API.
Outside pytest, :func:`start_local_platform` starts one (use it as a context manager); pytest is imported
only when it is already running (it loads this plugin), so the helpers work where pytest is not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from ._processes import terminate

__all__ = ["Inspector", "LocalPlatform", "start_local_platform"]

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


class Inspector:
    """Client for ``/_local/``: what the platform stored and received, and how it should misbehave."""

    def __init__(self, url: str, api_key: str, timeout: float = 30.0) -> None:
        self._client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {api_key}"}, timeout=timeout)

    def _get(self, path: str, **params: Any) -> Any:
        response = self._client.get(path, params={k: v for k, v in params.items() if v is not None})
        response.raise_for_status()
        return response.json()

    def _send(self, method: str, path: str, body: Any = None) -> Any:
        response = self._client.request(method, path, json=body)
        response.raise_for_status()
        return response.json()

    def runs(self) -> list[dict[str, Any]]:
        """Every run, newest first."""
        return list(self._get("/_local/runs"))

    def run(self, run_id: str) -> dict[str, Any]:
        return dict(self._get(f"/_local/runs/{run_id}"))

    def samples(self, run_id: str, offset: int = 0, limit: int = 1000) -> dict[str, Any]:
        """``{"total", "items"}``: v0 sample rows as stored."""
        return dict(self._get(f"/_local/runs/{run_id}/samples", offset=offset, limit=limit))

    def episodes(self, run_id: str, offset: int = 0, limit: int = 1000) -> dict[str, Any]:
        """``{"total", "items"}``: uploaded episodes (member traces inline) and bare traces of the run."""
        return dict(self._get(f"/_local/runs/{run_id}/episodes", offset=offset, limit=limit))

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        return list(self._get(f"/_local/runs/{run_id}/steps"))

    def step_rows(self, run_id: str, step: int, offset: int = 0, limit: int = 1000) -> dict[str, Any]:
        """``{"total", "items"}``: rows decoded from the step's confirmed Parquet objects."""
        return dict(self._get(f"/_local/runs/{run_id}/steps/{step}/rows", offset=offset, limit=limit))

    def requests(self, limit: int = 200, run_id: str | None = None) -> list[dict[str, Any]]:
        """Recorded requests, newest last; ``run_id`` keeps those concerning one run."""
        return list(self._get("/_local/requests", limit=limit, run_id=run_id))

    def add_fault(self, **rule: Any) -> list[dict[str, Any]]:
        """One rule: ``action`` (fail_before, fail_after, reset_after, hold_after, delay, rate_limit), ``path``,
        ``method``, ``times``, ``status``, ``retry_after``, ``delay_s``, ``code``, ``message``. Returns every rule."""
        return list(self._send("POST", "/_local/faults", rule))

    def faults(self) -> list[dict[str, Any]]:
        return list(self._get("/_local/faults"))

    def clear_faults(self) -> None:
        self._send("DELETE", "/_local/faults")

    def settings(self, **changes: Any) -> dict[str, Any]:
        """Changes the given settings (none: just reads them); returns them all."""
        if not changes:
            return dict(self._get("/_local/settings"))
        return dict(self._send("POST", "/_local/settings", changes))

    def publish_environment(self, owner: str, name: str) -> str:
        """Publishes ``owner/name`` so that ``@latest`` resolves; returns its id."""
        return str(self._send("POST", "/_local/environments", {"owner": owner, "name": name})["id"])

    def hosted_run(
        self, kind: str, name: str | None = None, team_id: str | None = None, model: str | None = None
    ) -> dict[str, Any]:
        """A run the platform launched: ``{"id", "token"}``; reach it through ``<url>/api/internal``."""
        body = {"kind": kind, "name": name, "team_id": team_id, "model": model}
        return dict(self._send("POST", "/_local/hosted-runs", {k: v for k, v in body.items() if v is not None}))

    def viewer_login_path(self) -> str:
        """A fresh one-time viewer sign-in path (``/_viewer/login?token=...``): it signs one browser in."""
        return str(self._send("POST", "/_viewer/logins")["path"])

    def close(self) -> None:
        self._client.close()


def _flags(options: Mapping[str, Any]) -> list[str]:
    flags: list[str] = []
    for name, value in options.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple, set, frozenset)):
            value = ",".join(sorted(value))
        flags += [f"--{name.replace('_', '-')}", str(value)]
    return flags


class LocalPlatform:
    """A local platform server running as a subprocess on a loopback port."""

    def __init__(self, data_dir: Path, options: Mapping[str, Any] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self._options = dict(options or {})
        self._process: subprocess.Popen[bytes] | None = None
        self._port = int(self._options.pop("port", 0))
        self._initial_settings: dict[str, Any] = {}
        self.url = ""
        self.api_key = ""
        self._inspect: Inspector | None = None

    @property
    def traces_url(self) -> str:
        return self.url

    @property
    def env(self) -> dict[str, str]:
        """Environment variables that point a Prime SDK at this server."""
        return {
            "PRIME_API_KEY": self.api_key,
            "PRIME_API_BASE_URL": self.url,
            "PRIME_TRACES_URL": self.url,
            "PRIME_FRONTEND_URL": self.url,
        }

    @property
    def inspect(self) -> Inspector:
        if self._inspect is None:
            raise RuntimeError("the local platform is not running")
        return self._inspect

    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"

    def start(self, timeout: float = START_TIMEOUT) -> LocalPlatform:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        ready = self.data_dir / "ready.json"
        ready.unlink(missing_ok=True)
        command = [sys.executable, "-m", "prime_otel.local", "--port", str(self._port), "--data", str(self.data_dir)]
        command += ["--ready-file", str(ready), *_flags(self._options)]
        with self.log_file.open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        info = self._wait_ready(ready, timeout)
        self.url, self.api_key = info["url"], info["api_key"]
        self._port = int(self.url.rsplit(":", 1)[1])
        self._inspect = Inspector(self.url, self.api_key)
        if not self._initial_settings:
            self._initial_settings = self._inspect.settings()
        return self

    def _wait_ready(self, ready: Path, timeout: float) -> dict[str, Any]:
        assert self._process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready.exists():
                return dict(json.loads(ready.read_text()))
            if self._process.poll() is not None:
                break
            time.sleep(0.02)
        self.stop()
        tail = self.log_file.read_text(errors="replace")[-4000:] if self.log_file.exists() else ""
        raise RuntimeError(f"local platform did not start within {timeout:g}s:\n{tail}")

    def stop(self) -> None:
        """Stops the server (SIGTERM, then SIGKILL after a bounded wait)."""
        if self._inspect is not None:
            self._inspect.close()
            self._inspect = None
        process, self._process = self._process, None
        if process is not None:
            terminate(process, STOP_TIMEOUT)

    def viewer_login_url(self) -> str:
        """A one-time link that signs a browser in to the viewer, so the run links printed by the SDK open
        without asking for the key (the key itself is never in the link)."""
        return f"{self.url}{self.inspect.viewer_login_path()}"

    def restart(self, timeout: float = START_TIMEOUT) -> LocalPlatform:
        """Stops and starts again on the same data directory and port."""
        self.stop()
        return self.start(timeout)

    def reset(self) -> None:
        """Clears fault rules and restores the settings the server started with (for shared servers)."""
        self.inspect.clear_faults()
        self.inspect.settings(**self._initial_settings)

    def __enter__(self) -> LocalPlatform:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def start_local_platform(data_dir: str | os.PathLike[str], **options: Any) -> LocalPlatform:
    """Starts a server on ``data_dir``; ``options`` are the command-line options in snake case
    (``traces="disabled"``, ``teams=["team_a"]``, ``samples_rate_limit=5``, ``api_key=...``, ``port=...``)."""
    return LocalPlatform(Path(data_dir), options).start()


if "pytest" in sys.modules:  # loaded as pytest's plugin (or beside it): the fixtures need pytest
    from ._pytest_fixtures import local_platform, local_platform_session, pytest_configure

    __all__ += ["local_platform", "local_platform_session", "pytest_configure"]
