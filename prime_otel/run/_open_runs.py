"""The runs this process logs into, kept per process instead of in one environment variable.

- Owned runs form a stack: ``PRIME_RUN_ID`` (with the owner's PID and the run's kind) names the newest one still
  open, so a child started now inherits it; when a run finishes, in any order, the variables name the newest run
  still open again, or go back to what the process had before its first run.
- The same list is kept in ``<runs folder>/.owners/<pid>.json``, so a process started earlier (a long-lived
  worker pool, a pool created before the first ``init()``) asks its owner which run of its kind is open *now*
  instead of trusting the variables it inherited.
- Runs this process joined (``prime_otel.join()``) are kept so a pool worker reuses one handle per run.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .._fork import register_for_fork_reset
from ..errors import ConfigurationError, RunFinishedError
from ..resources import RUN_ID_ENV, RUN_KIND_ENV, RUN_OWNER_PID_ENV, inherited_run
from ._membership import OPEN_MARKER, WORKERS_DIR, write_quickly

OWNERS_DIR = ".owners"
_ADVERTISED = (RUN_ID_ENV, RUN_OWNER_PID_ENV, RUN_KIND_ENV)


@dataclass(frozen=True)
class OpenRun:
    """A run as its owner lists it: enough for another local process to join it and check it is open."""

    id: str
    kind: str
    mode: str
    folder: str

    @property
    def marker(self) -> Path:
        return Path(self.folder) / OPEN_MARKER


class JoinableRun(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def finished(self) -> bool: ...


class OpenRuns:
    def __init__(self, environ: MutableMapping[str, str] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        self._lock = threading.RLock()
        self._owned: list[tuple[OpenRun, Path, JoinableRun]] = []
        self._owner_dirs: set[Path] = set()
        self._before: dict[str, str] | None = None
        self._joined: dict[str, JoinableRun] = {}

    # -- owned runs ---------------------------------------------------------------------------------

    def opened(self, run: OpenRun, runs_dir: Path, handle: JoinableRun, *, advertise: bool = True) -> None:
        with self._lock:
            if self._before is None:
                self._before = {name: self._environ[name] for name in _ADVERTISED if name in self._environ}
            self._owned.append((run, runs_dir, handle))
            self._owner_dirs.add(runs_dir)
            if advertise:
                self._advertise(run)
            self._write_owner_files()

    def closed(self, run_id: str) -> None:
        with self._lock:
            self._owned = [entry for entry in self._owned if entry[0].id != run_id]
            self._write_owner_files()
            if self._environ.get(RUN_ID_ENV) != run_id or self._environ.get(RUN_OWNER_PID_ENV) != str(os.getpid()):
                return  # the variables name another run (or the application changed them): leave them
            if self._owned:
                self._advertise(self._owned[-1][0])
                return
            for name in _ADVERTISED:
                self._environ.pop(name, None)
            self._environ.update(self._before or {})
            self._before = None

    def owned(self, run_id: str) -> JoinableRun | None:
        with self._lock:
            return next((handle for run, _, handle in self._owned if run.id == run_id), None)

    def _advertise(self, run: OpenRun) -> None:
        self._environ[RUN_ID_ENV] = run.id
        self._environ[RUN_OWNER_PID_ENV] = str(os.getpid())
        self._environ[RUN_KIND_ENV] = run.kind

    def _write_owner_files(self) -> None:
        """The whole list, newest last, in every folder this process keeps runs in (online runs live in the
        per-user cache, offline ones where the user asked), so a worker finds it whichever it looks in first."""
        runs = [vars(run) for run, _, _ in self._owned]
        for runs_dir in self._owner_dirs:
            path = owner_file(runs_dir, os.getpid())
            with contextlib.suppress(OSError):
                if not runs:
                    path.unlink(missing_ok=True)
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                write_quickly(path, {"pid": os.getpid(), "runs": runs})
        if not runs:
            self._owner_dirs.clear()

    # -- joined runs ---------------------------------------------------------------------------------

    def joined(self, run_id: str) -> JoinableRun | None:
        with self._lock:
            run = self._joined.get(run_id)
            return run if run is not None and not run.finished else None

    def remember_joined(self, run: JoinableRun) -> None:
        with self._lock:
            self._joined = {key: r for key, r in self._joined.items() if not r.finished}
            self._joined[run.id] = run

    def reset_after_fork(self) -> None:
        """A forked child owns no run (its inherited ones only log); the variables keep naming the parent's."""
        self._lock = threading.RLock()
        self._owned = []
        self._owner_dirs = set()
        self._before = None
        self._joined = {}


def owner_file(runs_dir: Path, pid: int) -> Path:
    return Path(runs_dir) / OWNERS_DIR / f"{pid}.json"


def owners_open_runs(runs_dir: Path, pid: int) -> list[OpenRun] | None:
    """The runs ``pid`` lists as open in ``runs_dir``, newest last; None when it keeps no list there (it is not
    on this machine, not running, or owns no run right now)."""
    path = owner_file(runs_dir, pid)
    try:
        document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    runs = []
    for entry in document.get("runs", []):
        with contextlib.suppress(TypeError, KeyError):
            run = OpenRun(id=entry["id"], kind=entry["kind"], mode=entry["mode"], folder=entry["folder"])
            if run.marker.exists():
                runs.append(run)
    return runs


@dataclass(frozen=True)
class JoinTarget:
    id: str
    kind: str | None
    #: The run as its local owner listed it (its folder holds the open marker); None: the owner is elsewhere.
    listed: OpenRun | None = None


def find_run_to_join(kind: str, runs_dirs: Sequence[Path]) -> JoinTarget | None:
    """The run a new ``init()`` in this process joins: the newest open run of ``kind`` its owner (the process that
    advertised one, or the multiprocessing parent) lists now; else the advertised run, unless its folder here shows
    it finished; None when there is nothing to join. ``runs_dirs``: where run folders live on this machine (the
    online runs' cache and the offline runs' folder)."""
    inherited = inherited_run()
    owner = inherited.owner_pid if inherited is not None and inherited.owner_pid else _multiprocessing_parent()
    listed: list[OpenRun] = []
    if owner is not None and owner != os.getpid():
        # Every folder the owner keeps runs in holds its whole list (online and offline runs, in order).
        listed = next((found for d in runs_dirs if (found := owners_open_runs(d, owner)) is not None), [])
    same_kind = [run for run in listed if run.kind == kind]
    if same_kind:
        return JoinTarget(same_kind[-1].id, kind, same_kind[-1])
    if inherited is None:
        return None
    folders = [Path(runs_dir) / inherited.id for runs_dir in runs_dirs]
    folder = next((candidate for candidate in folders if candidate.is_dir()), folders[0])
    if (folder / WORKERS_DIR).is_dir() and not (folder / OPEN_MARKER).exists() and inherited.kind in (None, kind):
        finisher = f"its owner (pid {owner})" if owner is not None else "a process on this machine"
        raise RunFinishedError(
            f"this process inherited {kind} run {inherited.id}, which {finisher} has finished (its folder {folder} "
            f"says so), and no other {kind} run is open to join. Pass the open run's run.handle to "
            "prime_otel.join(), give each rank of a multi-node run its own PRIME_RUNS_DIR, or unset PRIME_RUN_ID "
            "to open a run of this process's own."
        )
    if inherited.kind and inherited.kind != kind:
        raise ConfigurationError(
            f"this process inherited {inherited.kind} run {inherited.id} but init() asked for kind={kind!r}"
        )
    here = OpenRun(id=inherited.id, kind=kind, mode="", folder=str(folder))
    return JoinTarget(inherited.id, inherited.kind, here if here.marker.exists() else None)


def _multiprocessing_parent() -> int | None:
    """The process that started this one through multiprocessing (any start method), if any."""
    import multiprocessing

    parent = multiprocessing.parent_process()
    return parent.pid if parent is not None else None


OPEN_RUNS = OpenRuns()
register_for_fork_reset(OPEN_RUNS)
