"""The live status line: shown on an interactive terminal, quiet otherwise (issue 6)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from prime_otel.testing import LocalPlatform

ROOT = Path(__file__).resolve().parents[2]
PRODUCER = """
import time
import prime_otel as po
from tests._fixtures import numbered_record

run = po.init(name="status-line", environments=["gsm8k"], model="m")
run.log_episodes([numbered_record(i) for i in range(5)])
time.sleep(2.5)
run.finish()
"""


def _environment(platform: LocalPlatform, tmp_path: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PRIME_RUNS_DIR": str(tmp_path / "runs"),
        "PYTHONPATH": str(ROOT),
        **platform.env,
    }


def test_an_interactive_terminal_shows_sent_queued_spooled_and_failures(
    local_platform_session: LocalPlatform, tmp_path: Path
) -> None:
    parent, child = pty.openpty()
    producer = subprocess.Popen(
        [sys.executable, "-c", PRODUCER], env=_environment(local_platform_session, tmp_path), stderr=child
    )
    os.close(child)
    output = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([parent], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(parent, 4096)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        elif producer.poll() is not None:
            break
    os.close(parent)
    assert producer.wait(30) == 0
    text = output.decode(errors="replace")
    assert "sent 5  queued 0  spooled 0  failed 0" in text
    assert text.index("sent 5") < text.index("completed")  # the line is cleared before the report


def test_a_pipe_gets_no_status_line(local_platform_session: LocalPlatform, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PRODUCER],
        env=_environment(local_platform_session, tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    assert "queued" not in result.stderr and "completed" in result.stderr
