"""Producer scripts run in a subprocess against a local platform, and what the platform saw of their runs.

A script is a prelude (imports, helpers printing ``KEY <json>`` lines) followed by the test's body. It runs
with the platform's ``PRIME_*`` variables, a temporary HOME and no inherited run, exactly like a user's
program would; everything a test asserts about the run is read back from the platform's inspection API.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prime_otel.testing import LocalPlatform

REPO = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 60.0

PRELUDE = """\
import copy, json, os, signal, sys, threading, time, uuid
sys.path.insert(0, {repo!r})
import prime_otel as po
from tests._fixtures import fresh_records, load_records


def episodes(count):
    \"\"\"Fixture episode records under fresh ids, so every upload of each one can be told apart.\"\"\"
    return fresh_records("eval", count)


def ids(records):
    return [record["id"] if isinstance(record, dict) else record.id for record in records]


def say(key, value=None):
    print(key, json.dumps(value), flush=True)


def announce(run):
    say("RUN", run.id)


"""


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    said: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return str(self.one("RUN"))

    def one(self, key: str) -> Any:
        values = self.said.get(key, [])
        assert len(values) == 1, f"expected one {key} line, got {values}\n{self.describe()}"
        return values[0]

    def all(self, key: str) -> list[Any]:
        return self.said.get(key, [])

    def describe(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"


def _parse(line: str, said: dict[str, list[Any]]) -> None:
    key, _, value = line.partition(" ")
    if key.isupper() and value:
        try:
            said.setdefault(key, []).append(json.loads(value))
        except ValueError:
            return


class Running:
    """A started producer: read what it says as it says it, signal it, wait for it to end."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._process = process
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        self._said: dict[str, list[Any]] = {}
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _read_stderr(self) -> None:
        assert self._process.stderr is not None
        self._stderr.extend(self._process.stderr)

    def wait_for(self, key: str, timeout: float = WAIT_SECONDS) -> Any:
        """The value of the first ``key`` line; fails when the producer ended or stayed silent too long."""
        deadline = time.monotonic() + timeout
        while key not in self._said:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self._process.kill()
                raise AssertionError(f"the producer did not say {key} within {timeout:g} s") from None
            if line is None:
                outcome = self.finish()
                raise AssertionError(f"the producer ended before saying {key}\n{outcome.describe()}")
            self._stdout.append(line)
            _parse(line.rstrip("\n"), self._said)
        return self._said[key][0]

    def tell(self, line: str = "go") -> None:
        """Writes one line to the producer's stdin (a script waits on ``sys.stdin.readline()``)."""
        assert self._process.stdin is not None
        self._process.stdin.write(line + "\n")
        self._process.stdin.flush()

    def send_signal(self, signum: signal.Signals) -> None:
        self._process.send_signal(signum)

    def finish(self, timeout: float = WAIT_SECONDS) -> Outcome:
        if self._process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self._process.stdin.close()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout)
            raise AssertionError(f"the producer did not end within {timeout:g} s\n{''.join(self._stderr)}") from None
        for reader in self._readers:
            reader.join(timeout)
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self._stdout.append(line)
                _parse(line.rstrip("\n"), self._said)
        return Outcome(self._process.returncode, "".join(self._stdout), "".join(self._stderr), self._said)


class Producer:
    """Writes producer scripts into ``workdir`` and runs them against ``platform``."""

    def __init__(self, platform: LocalPlatform, workdir: Path) -> None:
        self.platform = platform
        self.workdir = workdir
        self.home = workdir / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self._scripts = 0

    def env(self, **extra: str) -> dict[str, str]:
        env = {name: value for name, value in os.environ.items() if not name.startswith("PRIME_")}
        env.update(self.platform.env)
        env["HOME"] = str(self.home)
        env.update(extra)
        return env

    def script(self, body: str) -> Path:
        self._scripts += 1
        path = self.workdir / f"producer_{self._scripts}.py"
        path.write_text(PRELUDE.format(repo=str(REPO)) + textwrap.dedent(body))
        return path

    def start(self, body: str, **extra_env: str) -> Running:
        process = subprocess.Popen(
            [sys.executable, str(self.script(body))],
            env=self.env(**extra_env),
            cwd=self.workdir,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return Running(process)

    def run(self, body: str, timeout: float = WAIT_SECONDS, **extra_env: str) -> Outcome:
        return self.start(body, **extra_env).finish(timeout)


class PlatformView:
    """What the platform stored and received for one run."""

    def __init__(self, platform: LocalPlatform, run_id: str) -> None:
        self.run_id = run_id
        self.snapshot = platform.inspect.run(run_id)
        self.requests = platform.inspect.requests(limit=1000, run_id=run_id)
        self._episodes = platform.inspect.episodes(run_id)["items"]

    @property
    def status(self) -> str:
        return str(self.snapshot["status"])

    @property
    def error_message(self) -> str | None:
        return self.snapshot.get("error_message")

    def _calls(self, method: str, suffix: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["method"] == method and r["path"].endswith(suffix)]

    @property
    def status_writes(self) -> list[dict[str, Any]]:
        """Every status-carrying PUT of the evaluation, whatever it was answered."""
        puts = self._calls("PUT", f"/evaluations/{self.run_id}")
        return [r for r in puts if isinstance(r["body"], dict) and "status" in r["body"]]

    @property
    def finalizes(self) -> list[dict[str, Any]]:
        return self._calls("POST", f"/evaluations/{self.run_id}/finalize")

    @property
    def creates(self) -> list[dict[str, Any]]:
        return self._calls("POST", "/evaluations/")

    @property
    def uploaded_episode_ids(self) -> list[str]:
        """Episode ids in every accepted Prime Traces upload of the run, one entry per time it was sent."""
        sent: list[str] = []
        for request in self._calls("POST", "/api/v1/traces"):
            if request["status"] == 200:
                sent += [line["id"] for line in request["body"]["traces"]["jsonl_lines"]]
        return sent

    @property
    def stored_episode_ids(self) -> list[str]:
        return [item["id"] for item in self._episodes]

    def assert_closed_once(self) -> None:
        """Exactly one terminal write: a finalize, or a status PUT, never both, never twice."""
        closing = len(self.finalizes) + len(self.status_writes)
        assert closing == 1, f"expected one closing write, got {closing}: {self.requests}"
