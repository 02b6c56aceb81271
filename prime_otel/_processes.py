"""Local processes by PID (Linux ``/proc`` where it exists): whether one still lives, and when it started; and
stopping a child process."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["pid_alive", "process_start", "terminate"]


def _process_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (Linux), or None where there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def process_start(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot), telling a reused PID from the one recorded."""
    stat = _process_stat(pid)
    return stat[19] if stat is not None and len(stat) > 19 else None


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = _process_stat(pid)
    return stat is None or stat[0] != "Z"


def terminate(process: subprocess.Popen[Any], timeout: float) -> None:
    """Stop a child that may still run: SIGTERM (it flushes and exits), SIGKILL when it is not gone within
    ``timeout`` seconds, then wait (bounded) for it."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout)
