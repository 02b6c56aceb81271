"""The live status line: opt-in (``init(status_line=True)`` or ``PRIME_OTEL_STATUS_LINE=1``), so by default it never
draws over a producer's own terminal UI; when asked for, shown on an interactive terminal only."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prime_otel.testing import LocalPlatform

ROOT = Path(__file__).resolve().parents[2]
PRODUCER = """
import sys
import time
import prime_otel as po
from tests._fixtures import numbered_record

wanted = {"argument": True, "off": False}.get(sys.argv[1]) if len(sys.argv) > 1 else None
run = po.init(name="status-line", environments=["gsm8k"], model="m", status_line=wanted)
run.log_episodes([numbered_record(i) for i in range(5)])
time.sleep(2.5)
run.finish()
"""


def _environment(platform: LocalPlatform, tmp_path: Path, variable: str | None = None) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PRIME_RUNS_DIR": str(tmp_path / "runs"),
        "PYTHONPATH": str(ROOT),
        **platform.env,
        **({"PRIME_OTEL_STATUS_LINE": variable} if variable is not None else {}),
    }


def _on_a_terminal(environment: dict[str, str], *args: str) -> str:
    """The producer's stderr, written to a pseudo-terminal."""
    parent, child = pty.openpty()
    producer = subprocess.Popen([sys.executable, "-c", PRODUCER, *args], env=environment, stderr=child)
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
    return output.decode(errors="replace")


@pytest.mark.parametrize(("variable", "args"), [("1", ()), (None, ("argument",))])
def test_asked_for_an_interactive_terminal_shows_sent_queued_spooled_and_failures(
    local_platform_session: LocalPlatform, tmp_path: Path, variable: str | None, args: tuple[str, ...]
) -> None:
    text = _on_a_terminal(_environment(local_platform_session, tmp_path, variable), *args)
    assert "sent 5  queued 0  spooled 0  failed 0" in text
    assert text.index("sent 5") < text.index("completed")  # the line is cleared before the report


@pytest.mark.parametrize(("variable", "args"), [(None, ()), ("1", ("off",))])
def test_by_default_or_turned_off_by_the_argument_a_terminal_gets_no_status_line(
    local_platform_session: LocalPlatform, tmp_path: Path, variable: str | None, args: tuple[str, ...]
) -> None:
    """The producer's own terminal UI stays its own: nothing is redrawn unless asked for (the argument wins)."""
    text = _on_a_terminal(_environment(local_platform_session, tmp_path, variable), *args)
    assert "queued" not in text and "completed" in text


def test_a_pipe_gets_no_status_line_even_when_asked_for(local_platform_session: LocalPlatform, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PRODUCER],
        env=_environment(local_platform_session, tmp_path, "1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    assert "queued" not in result.stderr and "completed" in result.stderr
