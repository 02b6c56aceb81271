"""Zero-code: the same agent under ``opentelemetry-instrument`` with the official instrumentation installed and
the run described by environment variables. The instrumentation's spans go to the global tracer provider, which
is the run's, and become the platform episode."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prime_otel.testing import LocalPlatform
from tests.genai._agent import CONTENT_ON_SPANS
from tests.genai._chat import ANSWER, ChatServer
from tests.genai._expect import check_episode, check_sample_row

REPO = Path(__file__).resolve().parents[2]
INSTRUMENT = Path(sys.executable).with_name("opentelemetry-instrument")


def test_the_agent_under_opentelemetry_instrument_lands_as_one_full_episode(
    local_platform: LocalPlatform, tmp_path: Path
) -> None:
    with ChatServer() as chat:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "PYTHONPATH": str(REPO),
            "PRIME_RUNS_DIR": str(tmp_path / "runs"),
            **local_platform.env,
            **CONTENT_ON_SPANS,
            "OTEL_PYTHON_DISTRO": "prime",
            "OTEL_PYTHON_CONFIGURATOR": "prime",
            "PRIME_RUN_NAME": "genai-zero-code",
            "PRIME_RUN_KIND": "eval",
            "PRIME_RUN_MODEL": "calc-model-1",
            "PRIME_RUN_ENVIRONMENTS": "calculator",
            "CHAT_URL": chat.base_url,
        }
        result = subprocess.run(
            [str(INSTRUMENT), sys.executable, "-m", "tests.genai._agent"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ANSWER
    [run] = [run for run in local_platform.inspect.runs() if run["name"] == "genai-zero-code"]
    assert local_platform.inspect.run(run["id"])["status"] in ("PROCESSING", "COMPLETED")
    [episode] = local_platform.inspect.episodes(run["id"])["items"]
    check_episode(episode, run["id"])
    [row] = local_platform.inspect.samples(run["id"])["items"]
    check_sample_row(row)
