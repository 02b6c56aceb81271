"""verifiers 0.4.0's own ``platform.py`` (unmodified) on prime-otel through the ``prime_runs`` shim lands what it
lands on the released prime-runs 0.1.4: a normal eval, one aborted by an exception, one cancelled by Ctrl-C and
one attached by id to a hosted evaluation. Both SDKs run in their own process against the same local platform.

The differences allowed are the documented improvements: the summary's ``prime_runs.delivery`` counts, and the
eval samples prime-otel also writes to the sample table (``sinks="dual"``), which must be exactly the rows 0.1.4's
own projection makes of the same episodes. Request counts are not compared (0.1.4 sends an extra status write).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from prime_otel.testing import LocalPlatform
from tests.compat._verifiers_flows import FLOW_NAMES

CHECKOUT = Path(__file__).resolve().parents[2]
SDKS = ("released", "shim")
#: Fields of a run that say when it was written or how often it was called, not what landed.
_NOT_COMPARED = frozenset({"id", "created_at", "updated_at", "requests", "num_samples", "summary"})


def run_flows(platform: LocalPlatform, sdk: str, home: Path) -> dict[str, Any]:
    hosted = platform.inspect.hosted_run("eval", name="vf-hosted", model="Qwen/Qwen3-8B")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(CHECKOUT),
        "HOME": str(home),
        "PRIME_RUNS_DIR": str(home / "runs"),
        **platform.env,
    }
    result = subprocess.run(
        [sys.executable, "-m", "tests.compat._verifiers_flows", sdk, hosted["id"], hosted["token"]],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    seen = dict(json.loads(result.stdout.strip().splitlines()[-1]))
    assert seen["sdk"] == ("prime_runs" if sdk == "released" else "prime_otel")
    for flow, view in seen["flows"].items():
        view["tag"] = f"{sdk}-{flow}-"
        view["run"] = platform.inspect.run(view["id"])
        view["episodes"] = sorted(platform.inspect.episodes(view["id"])["items"], key=lambda item: item["id"])
        view["samples"] = sorted(platform.inspect.samples(view["id"])["items"], key=lambda row: row["sample_id"])
    return seen


@pytest.fixture(scope="module")
def landed(local_platform_session: LocalPlatform, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return {sdk: run_flows(local_platform_session, sdk, tmp_path_factory.mktemp(sdk))["flows"] for sdk in SDKS}


def normalized(value: Any, view: dict[str, Any]) -> Any:
    """``value`` with the flow's run id and episode-id tag made neutral, so two runs' records compare."""
    text = json.dumps(value, sort_keys=True).replace(view["id"], "<run>").replace(view["tag"], "<tag>-")
    return json.loads(text)


def settled(run: dict[str, Any]) -> dict[str, Any]:
    """A completed evaluation reads PROCESSING for a moment after its finalize, then COMPLETED: the same outcome."""
    return {**run, "status": "COMPLETED" if run["status"] == "PROCESSING" else run["status"]}


def without_delivery(summary: dict[str, Any]) -> dict[str, Any]:
    block = {key: value for key, value in summary.get("prime_runs", {}).items() if key != "delivery"}
    return {**summary, "prime_runs": block}


EXPECTED = {
    "normal": ("completed", "COMPLETED", None),
    "aborted": ("failed", "FAILED", "ValueError: the judge model is unreachable"),
    "cancelled": ("cancelled", "CANCELLED", "interrupted"),
    "attached": ("completed", "COMPLETED", None),
}


@pytest.mark.parametrize("flow", FLOW_NAMES)
def test_platform_py_through_the_shim_lands_what_the_released_prime_runs_lands(
    landed: dict[str, Any], flow: str
) -> None:
    released, shim = landed["released"][flow], landed["shim"][flow]
    status, platform_status, error = EXPECTED[flow]
    for view in (released, shim):
        assert (view["status"], settled(view["run"])["status"], view["run"]["error_message"]) == (
            status,
            platform_status,
            error,
        )
        assert view["assigned_id"] == view["id"] and view["finished"]
        assert view["run"]["num_episodes"] == 3

    # What the producer sees: status, link, losses (none), and its summary after finish().
    for key in ("status", "finished", "url_path", "errors", "incomplete", "state_error"):
        assert normalized(shim[key], shim) == normalized(released[key], released), key
    assert without_delivery(shim["summary"]) == released["summary"]
    assert shim["summary"] == shim["run"]["summary"]  # the run's summary is the platform's copy

    # The evaluation itself, its summary, and the episodes and member traces in Prime Traces.
    released_run = {k: v for k, v in settled(released["run"]).items() if k not in _NOT_COMPARED}
    shim_run = {k: v for k, v in settled(shim["run"]).items() if k not in _NOT_COMPARED}
    assert normalized(shim_run, shim) == normalized(released_run, released)
    assert without_delivery(shim["run"]["summary"]) == released["run"]["summary"]
    delivery = shim["run"]["summary"]["prime_runs"]["delivery"]
    assert {sink: counts["delivered"] for sink, counts in delivery.items()} == {"traces": 3, "eval_samples": 3}
    assert normalized(shim["episodes"], shim) == normalized(released["episodes"], released)
    assert released["run"]["requests"].get("POST /api/v1/evaluations/", 0) == shim["run"]["requests"].get(
        "POST /api/v1/evaluations/", 0
    )

    # Sample table: 0.1.4 writes none inside the Prime Traces beta; prime-otel writes 0.1.4's own rows.
    assert released["samples"] == []
    expected_rows = sorted(released["v0_rows"], key=lambda row: row["sample_id"])
    assert normalized(shim["samples"], shim) == normalized(expected_rows, released)
