"""Worker processes of a run, coordinated through the run's folder on this machine.

The owner keeps ``<run folder>/.open`` while the run is open. A process that joins (a pool worker, a forked
child, a spawned helper) holds that file open and, for every log call, takes a shared lock on it and checks it
is still linked: the owner closes the run by taking the exclusive lock and unlinking it, so a log call is either
accepted before the closing (and the owner waits for it) or refused with ``RunFinishedError``. Records never
land in a finished run.

Each joined process writes ``<run folder>/workers/<pid>.json``: what it logged, what is still unsent, what each
sink took. The owner waits (within its finish budget) until every live worker sent what it logged, and its
report says how many records came from workers and how many of those each worker lost.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import RunFinishedError
from ._report import WorkerTally

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: the check is still made, without the lock
    fcntl = None  # type: ignore[assignment]

OPEN_MARKER = ".open"
WORKERS_DIR = "workers"
_POLL_SECONDS = 0.02

Progress = Callable[[], Mapping[str, Any]]


def write_quickly(path: Path, document: Mapping[str, Any]) -> None:
    """Whole-file replace without fsync: the file coordinates live processes, it need not survive a power cut."""
    temporary = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")
    temporary.write_text(json.dumps(document), encoding="utf-8")
    os.replace(temporary, path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) sent everything it ever will.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rpartition(")")[2].split()[0] != "Z"
    return True


def _lock(descriptor: int, operation: int) -> None:
    if fcntl is not None and descriptor >= 0:
        with contextlib.suppress(OSError):  # an unlockable file still gets the link check
            fcntl.flock(descriptor, operation)


class RunMarker:
    """The owner's side: the open marker, and the workers' reports."""

    def __init__(self, folder: Path, document: Mapping[str, Any]) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / WORKERS_DIR).mkdir(exist_ok=True)
        write_quickly(folder / OPEN_MARKER, document)

    @property
    def path(self) -> Path:
        return self.folder / OPEN_MARKER

    def close(self) -> None:
        """From now on every joined process's log call is refused; calls admitted before this are reported."""
        with contextlib.suppress(FileNotFoundError), open(self.path, "rb") as marker:
            _lock(marker.fileno(), fcntl.LOCK_EX if fcntl else 0)
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def reports(self) -> list[dict[str, Any]]:
        found = []
        for path in sorted((self.folder / WORKERS_DIR).glob("*.json")):
            with contextlib.suppress(OSError, ValueError):
                found.append(json.loads(path.read_text(encoding="utf-8")))
        return found

    def wait_for_workers(self, deadline: float) -> bool:
        """Until every live worker has nothing unsent (or the deadline); True when none is left waiting."""
        while True:
            waiting = [r for r in self.reports() if r.get("pending", 0) > 0 and _alive(int(r.get("pid", 0)))]
            if not waiting:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_SECONDS)

    def tally(self) -> WorkerTally:
        reports = [r for r in self.reports() if r.get("logged", 0) > 0]
        logged = delivered = 0
        lost: dict[int, int] = {}
        for report in reports:
            sinks = report.get("sinks") or {}
            everywhere = min((int(s.get("delivered", 0)) for s in sinks.values()), default=0)
            count = int(report.get("logged", 0))
            everywhere = min(everywhere, count)
            logged += count
            delivered += everywhere
            if count > everywhere:
                lost[int(report.get("pid", 0))] = count - everywhere
        return WorkerTally(processes=len(reports), logged=logged, delivered=delivered, lost_by_worker=lost)


class Membership:
    """A joined process's side: the liveness check of each log call and its report to the owner."""

    def __init__(self, folder: Path, run_id: str) -> None:
        self.folder = folder
        self.run_id = run_id
        self._progress: Progress | None = None
        self._open()

    def _open(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        try:
            self._descriptor = os.open(self.folder / OPEN_MARKER, os.O_RDONLY)
        except FileNotFoundError:
            raise RunFinishedError(
                f"run {self.run_id} is finished: its owner closed it, so this process cannot log into it. "
                "Join the run that is open now (pass its run.handle to prime_otel.join())."
            ) from None
        self.logged = 0
        self._in_hand = 0
        self._last_pending = 0
        self._report_path = self.folder / WORKERS_DIR / f"{self._pid}.json"

    def follow(self, progress: Progress) -> None:
        """``progress()`` gives what the process's uploaders hold and what each sink took (for the report)."""
        self._progress = progress

    @property
    def open(self) -> bool:
        try:
            return os.fstat(self._descriptor).st_nlink > 0
        except OSError:
            return False

    @contextlib.contextmanager
    def admitting(self, count: int) -> Iterator[None]:
        """One log call of ``count`` records: refused once the owner closed the run; else reported before it
        queues, so the owner, closing, waits for it."""
        with self._lock:
            _lock(self._descriptor, fcntl.LOCK_SH if fcntl else 0)
            try:
                if not self.open:
                    raise RunFinishedError(
                        f"run {self.run_id} was finished by its owner; this process's records are refused. "
                        "Join the run that is open now (pass its run.handle to prime_otel.join())."
                    )
                self.logged += count
                self._in_hand += count
                self.report()
            finally:
                _lock(self._descriptor, fcntl.LOCK_UN if fcntl else 0)
        try:
            yield
        finally:
            with self._lock:
                self._in_hand -= count
            if self._pending() < self._last_pending:
                self.report()  # nothing queued (written at once, or dropped): the owner must not wait for it

    def _pending(self) -> int:
        held = self._progress() if self._progress is not None else {}
        return self._in_hand + int(held.get("queued", 0))

    def report(self, *, final: bool = False) -> None:
        """Writes this process's report for the owner (any thread; never raises)."""
        if os.getpid() != self._pid:
            return
        held = dict(self._progress()) if self._progress is not None else {}
        pending = 0 if final else self._in_hand + int(held.get("queued", 0))
        self._last_pending = pending
        document = {"pid": self._pid, "logged": self.logged, "pending": pending, "sinks": held.get("sinks", {})}
        with contextlib.suppress(OSError):
            write_quickly(self._report_path, document)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._descriptor)

    def reset_after_fork(self) -> None:
        """A forked child reports as its own worker, through its own open file (a lock is per open file)."""
        with contextlib.suppress(OSError):
            os.close(self._descriptor)
        self._descriptor = -1
        with contextlib.suppress(RunFinishedError):
            self._open()
