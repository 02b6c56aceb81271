"""SIGTERM against every way an application treats it, once and twice, with runs on any thread.

The rule (docs/workers-and-signals.md):

- no application handler: every open run closes FAILED "crashed: signal SIGTERM", then the process dies by
  SIGTERM;
- an application handler runs first and decides: one raising ``KeyboardInterrupt`` ends the open runs
  CANCELLED "interrupted" (inside ``with run:`` or, for runs on other threads, at exit) and the process exits as
  interrupted; one that checkpoints and calls ``sys.exit(0)`` ends them COMPLETED and the process exits 0 (a run
  on another thread only when the router saw that exit: the handler was installed before ``import prime_otel``
  or a run was opened on the main thread since; otherwise the exit code is invisible at exit and the unfinished
  run is a crash);
- ``SIG_IGN``: nothing happens; the runs go on and finish normally;
- a second SIGTERM during a slow closing never leaves a run open: each run is closed once with the status above;
- a run finished before the signal keeps its status, whichever of two runs finished first.

Cells are real programs against one local platform whose status writes are slowed down; they run a few at a
time and each parametrized test checks its own cell.
"""

from __future__ import annotations

import itertools
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from prime_otel.testing import LocalPlatform

from ._producer import PlatformView, Producer

HANDLERS = ["none", "raises-keyboard-interrupt", "checkpoints-and-exits-0", "ignored"]
SIGNALS = ["one", "two"]
PLACEMENTS = ["main-thread", "worker-thread", "two-runs-first-finished-first", "two-runs-second-finished-first"]
CELLS = list(itertools.product(HANDLERS, SIGNALS, PLACEMENTS))
SLOW_STATUS_WRITE_SECONDS = 1.0
SECOND_SIGNAL_AFTER_SECONDS = 0.5
PARALLEL_CELLS = 4

SCRIPT = """\
HANDLER, PLACEMENT = {handler!r}, {placement!r}


def on_term(signum, frame):
    say("APP_HANDLER", signum)
    if HANDLER == "raises-keyboard-interrupt":
        raise KeyboardInterrupt
    say("CHECKPOINT")
    sys.exit(0)


if HANDLER in ("raises-keyboard-interrupt", "checkpoints-and-exits-0"):
    signal.signal(signal.SIGTERM, on_term)
elif HANDLER == "ignored":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def open_run():
    run = po.init(environments=["gsm8k"], model="m", sinks="traces")
    run.log_episodes(episodes(1))
    run.flush()
    return run


if PLACEMENT == "main-thread":
    run = open_run()
    say("OPEN", [run.id])
    with run:
        say("READY")
        sys.stdin.readline()
elif PLACEMENT == "worker-thread":
    opened, done, box = threading.Event(), threading.Event(), {{}}

    def eval_in_a_thread():
        box["run"] = open_run()
        say("OPEN", [box["run"].id])
        opened.set()
        done.wait()
        box["run"].finish()

    worker = threading.Thread(target=eval_in_a_thread, daemon=True)
    worker.start()
    opened.wait(60)
    say("READY")
    sys.stdin.readline()
    done.set()
    worker.join(60)
else:
    first, second = open_run(), open_run()
    if PLACEMENT == "two-runs-second-finished-first":
        first, second = second, first
    first.finish()
    say("FINISHED_BEFORE", first.id)
    say("OPEN", [second.id])
    say("READY")
    sys.stdin.readline()
    second.finish()
say("END")
"""


@dataclass
class CellResult:
    returncode: int
    said: dict[str, list[Any]]
    stderr: str
    #: run id -> (status, error message, closing writes)
    runs: dict[str, tuple[str, str | None, int]] = field(default_factory=dict)

    def status(self, run_id: str) -> tuple[str, str | None]:
        status, error, _ = self.runs[run_id]
        return status, error


def _run_cell(producer: Producer, handler: str, signals: str, placement: str) -> CellResult:
    running = producer.start(SCRIPT.format(handler=handler, placement=placement))
    open_ids = running.wait_for("OPEN")
    running.wait_for("READY")
    running.send_signal(signal.SIGTERM)
    if signals == "two":
        time.sleep(SECOND_SIGNAL_AFTER_SECONDS)
        running.send_signal(signal.SIGTERM)
    if handler == "ignored":
        time.sleep(SECOND_SIGNAL_AFTER_SECONDS)  # let an ignored signal arrive before the program is told to go on
        running.tell()
    outcome = running.finish()
    result = CellResult(outcome.returncode, outcome.said, outcome.stderr)
    for run_id in [*outcome.said.get("FINISHED_BEFORE", []), *open_ids]:
        view = PlatformView(producer.platform, run_id)
        result.runs[run_id] = (view.status, view.error_message, len(view.finalizes) + len(view.status_writes))
    return result


@pytest.fixture(scope="module")
def matrix(platform: LocalPlatform, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, str], Any]:
    """Every cell, run a few at a time; a cell whose program failed to run keeps its exception."""
    platform.inspect.add_fault(
        method="PUT", path="/api/v1/evaluations/*", action="delay", delay_s=SLOW_STATUS_WRITE_SECONDS, times=None
    )
    platform.inspect.add_fault(
        method="POST",
        path="/api/v1/evaluations/*/finalize",
        action="delay",
        delay_s=SLOW_STATUS_WRITE_SECONDS,
        times=None,
    )
    root = tmp_path_factory.mktemp("signal-matrix")

    def cell(index: int, spec: tuple[str, str, str]) -> Any:
        workdir = root / f"cell-{index:02d}"
        workdir.mkdir()
        try:
            return _run_cell(Producer(platform, workdir), *spec)
        except Exception as failure:  # reported by the cell's own test
            return failure

    with ThreadPoolExecutor(PARALLEL_CELLS) as pool:
        results = dict(zip(CELLS, pool.map(cell, range(len(CELLS)), CELLS), strict=True))
    platform.reset()
    _write_table(root / "signal-matrix.md", results)
    return results


def _expected(handler: str, placement: str) -> tuple[int, str, str | None]:
    """(exit code, platform status, error message prefix) of the runs still open when SIGTERM arrives."""
    if handler == "none":
        return -signal.SIGTERM, "FAILED", "crashed: signal SIGTERM"
    if handler == "raises-keyboard-interrupt":
        return -signal.SIGINT, "CANCELLED", "interrupted"
    if handler == "checkpoints-and-exits-0" and placement == "worker-thread":
        # The handler was installed after import and no run opened on the main thread, so it ran without the
        # router in front and its sys.exit(0) is invisible at exit: the unfinished eval is a crash.
        return 0, "FAILED", "crashed: process exited without finishing the run"
    return 0, "COMPLETED", None


@pytest.mark.parametrize(("handler", "signals", "placement"), CELLS)
def test_the_platform_status_and_the_exit_code_follow_the_documented_rule(
    matrix: dict[tuple[str, str, str], Any], handler: str, signals: str, placement: str
) -> None:
    result = matrix[(handler, signals, placement)]
    if isinstance(result, Exception):
        raise result
    exit_code, status, message = _expected(handler, placement)
    assert result.returncode == exit_code, result.stderr
    open_ids = result.said["OPEN"][0]
    for run_id in open_ids:
        seen_status, seen_error = result.status(run_id)
        if status == "COMPLETED":
            assert seen_status in ("PROCESSING", "COMPLETED"), result.stderr
        else:
            assert seen_status == status, result.stderr
            assert seen_error is not None and seen_error.startswith(str(message)), seen_error
    for run_id in result.said.get("FINISHED_BEFORE", []):
        assert result.status(run_id)[0] in ("PROCESSING", "COMPLETED")
    assert all(writes == 1 for _, _, writes in result.runs.values()), result.runs
    called = len(result.said.get("APP_HANDLER", []))
    if handler in ("none", "ignored"):
        assert called == 0
    else:
        assert called >= 1  # the application's handler ran, whatever the finishing order of earlier runs
    assert ("END" in result.said) == (handler == "ignored")


def _write_table(path: Path, results: dict[tuple[str, str, str], Any]) -> None:
    """The matrix as a markdown table (for the closing note): exit code and platform status of each cell."""
    lines = ["| app handler | SIGTERMs | runs | exit code | status of the open run(s) |", "|---|---|---|---|---|"]
    for (handler, signals, placement), result in results.items():
        if isinstance(result, Exception):
            lines.append(f"| {handler} | {signals} | {placement} | error | {type(result).__name__} |")
            continue
        statuses = ", ".join(
            f"{status}" + (f" ({error})" if error else "")
            for run_id, (status, error, _) in result.runs.items()
            if run_id in result.said["OPEN"][0]
        )
        lines.append(f"| {handler} | {signals} | {placement} | {result.returncode} | {statuses} |")
    path.write_text("\n".join(lines) + "\n")
