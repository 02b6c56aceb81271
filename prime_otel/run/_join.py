"""``prime_otel.join()``: a worker's handle on a run another process (or thread) opened.

Pass ``run.handle`` (a small picklable value) to workers; each worker calls ``prime_otel.join(handle)`` where
it logs. A pool created before ``init()``, or a long-lived pool serving several runs, so always reaches the run
the handle names, and only while that run is open.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._config import resolve_settings
from .._types import RUN_MODES, RunKind, RunMode, run_kind_of
from ..errors import RunFinishedError
from ._membership import OPEN_MARKER
from ._open_runs import OPEN_RUNS, JoinTarget, OpenRun
from ._spool_home import online_runs_dir

if TYPE_CHECKING:
    from ._run import Run


@dataclass(frozen=True)
class RunHandle:
    """What a worker needs to join a run: its id and kind, its mode and its folder on this machine."""

    id: str
    kind: RunKind
    mode: RunMode
    folder: str


def join(run: RunHandle | str) -> Run:
    """The run this process logs into for ``run`` (a ``run.handle``, or a run id in this machine's runs folder).

    In the process that opened the run it is that very ``Run``; in another process it is a joined handle, made
    once per process and run and reused by later calls (a pool worker serving many tasks). A joined handle never
    closes the run: it drains what this process logged when the process ends (however ``multiprocessing`` ends
    it), and its records are counted in the owner's report. Raises ``RunFinishedError`` when the run is not open
    (any more): records never land in a finished run.
    """
    handle = run if isinstance(run, RunHandle) else _handle_from_folder(run)
    from ._init import init

    owned = OPEN_RUNS.owned(handle.id)
    if owned is not None:
        return owned  # type: ignore[return-value]
    joined = OPEN_RUNS.joined(handle.id)
    if joined is not None and joined.still_open:  # type: ignore[attr-defined]
        return joined  # type: ignore[return-value]
    if handle.mode == "disabled":
        return init(kind=handle.kind, mode="disabled", id=handle.id)
    listed = OpenRun(id=handle.id, kind=handle.kind, mode=handle.mode, folder=handle.folder)
    if not listed.marker.exists():
        raise _finished(handle.id)
    made = init(kind=handle.kind, mode=handle.mode, _joining=JoinTarget(handle.id, handle.kind, listed))
    OPEN_RUNS.remember_joined(made)
    return made


def _handle_from_folder(run_id: str) -> RunHandle:
    settings = resolve_settings()
    candidates = [online_runs_dir(settings) / run_id, Path(settings.runs_dir) / run_id]
    folder = next((candidate for candidate in candidates if (candidate / OPEN_MARKER).exists()), candidates[0])
    try:
        document = json.loads((folder / OPEN_MARKER).read_text(encoding="utf-8"))
        if not isinstance(document, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError):
        raise _finished(run_id) from None
    kind = run_kind_of(document.get("kind"))
    mode = next((mode for mode in RUN_MODES if mode == document.get("mode")), None)
    if kind is None or mode is None:
        raise _finished(run_id)
    return RunHandle(id=run_id, kind=kind, mode=mode, folder=str(folder))


def _finished(run_id: str) -> RunFinishedError:
    return RunFinishedError(
        f"run {run_id} is not open on this machine (finished, or never opened here): there is nothing to join. "
        "Pass the open run's run.handle to prime_otel.join()."
    )
