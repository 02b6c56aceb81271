"""A producer process (tests/gateway/_rank.py) steered through stdin, and the lines it printed."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
LINE_SECONDS = 60.0


class Rank:
    """A producer process (tests/gateway/_rank.py) and the lines it printed."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._stderr = log.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.gateway._rank"],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._lines: queue.Queue[tuple[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            key, _, value = line.strip().partition(" ")
            if value:
                self._lines.put((key, json.loads(value)))

    def expect(self, key: str) -> Any:
        try:
            said, value = self._lines.get(timeout=LINE_SECONDS)
        except queue.Empty:
            raise AssertionError(f"no {key} line within {LINE_SECONDS:g} s:\n{self.log.read_text()[-4000:]}") from None
        assert said == key, f"expected {key}, got {said} {value}"
        return value

    def tell(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        self._stderr.close()
