"""Runs one child (one SDK, one workload) against the shared local platform and collects what the platform saw."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prime_otel.testing import LocalPlatform

ROOT = Path(__file__).resolve().parent.parent
CHILD_TIMEOUT_SECONDS = 300.0


class ChildFailed(RuntimeError):
    pass


class Harness:
    """One platform, children run one at a time, so every request in a child's window is that child's."""

    def __init__(self, platform: LocalPlatform, home: Path) -> None:
        self._platform = platform
        self._home = home

    def account(self, traces_enabled: bool) -> None:
        """Switches the account into or out of the Prime Traces beta for the children that follow."""
        self._platform.inspect.settings(traces="enabled" if traces_enabled else "disabled")

    def add_fault(self, **rule: Any) -> None:
        """A fault rule of the local platform (``prime_otel/local/README.md``) for the children that follow."""
        self._platform.inspect.add_fault(**rule)

    def clear_faults(self) -> None:
        self._platform.inspect.clear_faults()

    def run(
        self,
        spec: dict[str, Any],
        *,
        timeout: float = CHILD_TIMEOUT_SECONDS,
        env: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Runs the child (``env`` overrides its environment); its own measurements plus ``requests`` and the
        stored counts of its run."""
        first_seq = self._last_seq() + 1
        completed = subprocess.run(
            [sys.executable, "-m", "benchmarks._child", json.dumps(spec)],
            cwd=self._home,
            env={**self._child_env(), **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if completed.returncode != 0 or not completed.stdout.strip():
            raise ChildFailed(f"child {spec} exited {completed.returncode}:\n{completed.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
        result["requests"] = self._requests_since(first_seq)
        snapshot = self._platform.inspect.run(result["run_id"])
        objects = snapshot.get("objects") or []
        result["stored"] = {
            "episodes": snapshot.get("num_episodes", 0),
            "traces": snapshot.get("num_traces", 0),
            "samples": snapshot.get("num_samples", 0),
            "metric_rows": len(snapshot.get("metric_rows") or []),
            "sample_objects": len(objects),
            "sample_rows": sum(int(o.get("rows", 0)) for o in objects),
            "status": snapshot.get("status"),
        }
        return result

    def _child_env(self) -> dict[str, str]:
        inherited = {key: value for key, value in os.environ.items() if not key.startswith("PRIME_")}
        path = os.pathsep.join(p for p in (str(ROOT), inherited.get("PYTHONPATH", "")) if p)
        # A private HOME and working directory: neither SDK may read a real ~/.prime/config.json, and
        # whatever a run keeps on disk (spool, reports) stays in the scratch folder.
        private = {"HOME": str(self._home), "PRIME_RUNS_DIR": str(self._home / "runs"), "PYTHONPATH": path}
        return {**inherited, **self._platform.env, **private, **self._rate_limits()}

    def _rate_limits(self) -> dict[str, str]:
        """Our SDK paces itself to the platform's limits: it is told the ones this platform enforces."""
        settings = self._platform.inspect.settings()
        return {
            "PRIME_SAMPLES_RATE_LIMIT": str(settings["samples_rate_limit"]),
            "PRIME_METRICS_RATE_LIMIT": str(settings["metrics_rate_limit"]),
        }

    def _last_seq(self) -> int:
        recent = self._platform.inspect.requests(limit=1)
        return int(recent[-1]["seq"]) if recent else 0

    def _requests_since(self, first_seq: int) -> dict[str, Any]:
        recorded = [r for r in self._platform.inspect.requests(limit=10_000) if r["seq"] >= first_seq]
        routes = Counter(f"{r['method']} {r.get('route') or r['path']} {r.get('status')}" for r in recorded)
        sent = sum(int(r.get("headers", {}).get("content-length", 0)) for r in recorded)
        return {"total": len(recorded), "body_bytes": sent, "by_route": dict(sorted(routes.items()))}
