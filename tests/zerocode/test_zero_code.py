"""Zero-code runs: an uninstrumented producer under ``opentelemetry-instrument``, configured only by
environment variables, against the local platform (issue 5)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from prime_otel.testing import LocalPlatform

PRODUCER = Path(__file__).with_name("producer.py")
INSTRUMENT = Path(sys.executable).with_name("opentelemetry-instrument")


def run_producer(platform: LocalPlatform, home: Path, ending: str, name: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        **platform.env,
        "OTEL_PYTHON_DISTRO": "prime",
        "OTEL_PYTHON_CONFIGURATOR": "prime",
        "PRIME_RUN_NAME": name,
        "PRIME_RUN_KIND": "eval",
        "PRIME_RUN_MODEL": "Qwen/Qwen3-8B",
        "PRIME_RUN_ENVIRONMENTS": "gsm8k",
        "PRIME_RUN_FRAMEWORK": "verifiers",
    }
    return subprocess.run(
        [str(INSTRUMENT), sys.executable, str(PRODUCER), ending], env=env, capture_output=True, text=True, timeout=120
    )


def runs_named(platform: LocalPlatform, name: str) -> list[dict[str, Any]]:
    return [run for run in platform.inspect.runs() if run["name"] == name]


@pytest.mark.parametrize(
    ("ending", "status", "error", "returncode"),
    [
        ("clean", {"PROCESSING", "COMPLETED"}, None, 0),
        ("raise", {"FAILED"}, "ValueError: the judge model is unreachable", 1),
        ("interrupt", {"CANCELLED"}, "interrupted", None),
        ("sigterm", {"FAILED"}, "crashed: signal SIGTERM", -15),
    ],
)
def test_a_zero_code_run_is_registered_records_land_and_it_closes_with_the_right_status(
    local_platform_session: LocalPlatform,
    tmp_path: Path,
    ending: str,
    status: set[str],
    error: str | None,
    returncode: int | None,
) -> None:
    name = f"zero-code-{ending}"
    result = run_producer(local_platform_session, tmp_path, ending, name)
    if returncode is not None:
        assert result.returncode == returncode, result.stderr
    [run] = runs_named(local_platform_session, name)
    snapshot = local_platform_session.inspect.run(run["id"])
    assert snapshot["status"] in status
    assert snapshot["error_message"] == error
    assert snapshot["num_episodes"] == 3
    assert snapshot["model"] == "Qwen/Qwen3-8B"


def test_a_spawned_child_under_auto_instrumentation_joins_and_never_closes_the_run(
    local_platform_session: LocalPlatform, tmp_path: Path
) -> None:
    result = run_producer(local_platform_session, tmp_path, "spawn", "zero-code-spawn")
    assert result.returncode == 0, result.stderr
    [run] = runs_named(local_platform_session, "zero-code-spawn")
    snapshot = local_platform_session.inspect.run(run["id"])
    assert snapshot["num_episodes"] == 6  # the parent's three and the child's three
    requests = snapshot["requests"]
    # One create, one update and one finalize, all by the owner: the child only joined.
    assert requests["POST /api/v1/evaluations/"] == 1
    assert requests["PUT /api/v1/evaluations/{evaluation_id}"] == 1
    assert requests["POST /api/v1/evaluations/{evaluation_id}/finalize"] == 1
