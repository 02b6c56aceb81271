"""Every URL ``make demo`` prints opens in a real browser: while the demo serves, and again from ``make local`` on
the same data folder and port after it stopped. Nothing asks for the key once the printed sign-in link was opened,
and no printed link is a 404."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from prime_otel.testing import start_local_platform

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
URL = re.compile(r"http://127\.0\.0\.1:\d+[^\s;,)]*")
RUN_LINK = re.compile(r"^Run (\S+) completed: (\S+)$")
DEMO_SECONDS = 240
WAIT_MS = 15_000  # for one page to show what it should


class _Demo:
    """``examples/demo.py`` as a user runs it, its output read line by line."""

    def __init__(self, tmp_path: Path, port: int) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PRIME_OTEL_DEMO_DATA": str(tmp_path / "data"),
            "PRIME_OTEL_DEMO_PORT": str(port),
            "PRIME_OTEL_DEMO_SERVE": "1",
            "PRIME_RUNS_DIR": str(tmp_path / "prime-runs"),
        }
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "examples" / "demo.py")],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + DEMO_SECONDS
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if text in line:
                return
        raise AssertionError(f"the demo never printed {text!r}:\n" + "\n".join(self.lines))

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        code = self.process.wait(60)
        while (line := self._queue.get(timeout=10)) is not None:
            self.lines.append(line)
        return code


@pytest.fixture
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def demo(tmp_path: Path, free_port: int) -> Iterator[_Demo]:
    running = _Demo(tmp_path, free_port)
    try:
        yield running
    finally:
        if running.process.poll() is None:
            running.process.kill()
            running.process.wait(30)


def _printed_urls(lines: list[str]) -> list[str]:
    urls: list[str] = []
    for line in lines:
        urls += [url for url in URL.findall(line) if url not in urls]
    return urls


def _check_opens(context: BrowserContext, url: str, run_ids: dict[str, str]) -> None:
    """A fresh tab on ``url`` shows its page, not the key form and not an error."""
    tab: Page = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    try:
        response = tab.goto(url)
        assert response is not None and response.ok, f"{url} answered {response and response.status}"
        if url in run_ids:
            expect(tab.get_by_test_id("run-id")).to_have_text(run_ids[url])
        else:
            expect(tab.get_by_test_id("runs-table")).to_be_visible()
            for run_id in run_ids.values():
                expect(tab.locator(f'[data-testid="run-row"][data-run-id="{run_id}"]')).to_have_count(1)
        expect(tab.get_by_test_id("key-form")).to_have_count(0)
    finally:
        tab.close()
    assert errors == [], f"uncaught errors on {url}: {errors}"


def test_every_url_the_demo_prints_opens_while_it_serves_and_after_make_local(
    demo: _Demo, browser_context: BrowserContext, tmp_path: Path, free_port: int
) -> None:
    demo.wait_for("Serving until Ctrl-C")
    urls = _printed_urls(demo.lines)
    run_ids = {match.group(2): match.group(1) for line in demo.lines if (match := RUN_LINK.match(line))}
    sign_in = [url for url in urls if "/_viewer/login?token=" in url]
    assert len(run_ids) == 2 and len(sign_in) == 1, "\n".join(demo.lines)
    assert any("/dashboard/training/" in url for url in run_ids)
    assert all(url.startswith(f"http://127.0.0.1:{free_port}") for url in urls)

    signing_in = browser_context.new_page()
    signing_in.goto(sign_in[0])
    expect(signing_in.get_by_test_id("runs-table")).to_be_visible()
    signing_in.close()
    for url in urls:
        if url not in sign_in:
            _check_opens(browser_context, url, run_ids)

    assert demo.stop() == 0
    assert any("run `make local` to browse these runs again" in line for line in demo.lines), demo.lines

    # What `make local` serves afterwards: the same data folder on the same port; this browser stays signed in.
    reopened = start_local_platform(tmp_path / "data", port=free_port)
    try:
        for url in urls:
            if url not in sign_in:
                _check_opens(browser_context, url, run_ids)
    finally:
        reopened.stop()
