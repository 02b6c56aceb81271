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

from .._processes import pid_alive
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
        """Each worker's report; one caught mid-write reads as unsent (``pending`` unknown) until its next read."""
        found: list[dict[str, Any]] = []
        for path in sorted((self.folder / WORKERS_DIR).glob("*.json")):
            try:
                found.append(json.loads(path.read_text(encoding="utf-8")))
            except ValueError:
                found.append({"pid": int(path.stem) if path.stem.isdigit() else 0})
            except OSError:
                continue
        return found

    def wait_for_workers(self, deadline: float) -> bool:
        """Until every live worker has nothing unsent (or the deadline); True when none is left waiting."""
        while True:
            waiting = [r for r in self.reports() if r.get("pending", 1) > 0 and pid_alive(int(r.get("pid", 0)))]
            if not waiting:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_SECONDS)

    def tally(self) -> WorkerTally:
        """Counted from the losses each worker reports (failed on a sink, dropped, or still unsent when the run
        closed): a sink that took no part (a standby fallback) can then never make delivered records look lost."""
        reports = [r for r in self.reports() if r.get("logged", 0) > 0]
        logged = delivered = 0
        lost: dict[int, int] = {}
        for report in reports:
            count = int(report.get("logged", 0))
            failed = max((int(s.get("failed", 0)) for s in (report.get("sinks") or {}).values()), default=0)
            missing = min(count, failed + int(report.get("dropped", 0)) + int(report.get("pending", 0)))
            logged += count
            delivered += count - missing
            if missing:
                lost[int(report.get("pid", 0))] = missing
        return WorkerTally(processes=len(reports), logged=logged, delivered=delivered, lost_by_worker=lost)


class Membership:
    """A joined process's side: the liveness check of each log call and its report to the owner. One per process
    and run (:func:`membership_of`): every ``Run`` object of the process logging into the run follows it."""

    def __init__(self, folder: Path, run_id: str) -> None:
        self.folder = folder
        self.run_id = run_id
        self._lock = threading.RLock()
        self._followers_lock = threading.RLock()
        self._followers: list[Progress] = []
        self._settled: dict[str, list[int]] = {}
        self._settled_dropped = 0
        self._pid = os.getpid()
        self.logged = 0
        self._in_hand = 0
        self._last_pending = 0
        self._report_path = self.folder / WORKERS_DIR / f"{self._pid}.json"
        self._report_descriptor: int | None = None
        self._report_length = 0
        try:
            self._descriptor = os.open(self.folder / OPEN_MARKER, os.O_RDONLY)
        except FileNotFoundError:
            raise RunFinishedError(
                f"run {self.run_id} is finished: its owner closed it, so this process cannot log into it. "
                "Join the run that is open now (pass its run.handle to prime_otel.join())."
            ) from None

    @property
    def mine(self) -> bool:
        return self._pid == os.getpid()

    def follow(self, progress: Progress) -> None:
        """``progress()`` gives what one ``Run``'s uploaders hold and what each of its sinks took."""
        with self._followers_lock:
            self._followers.append(progress)

    def leave(self, progress: Progress) -> None:
        """A follower finished: what its sinks took stays counted."""
        final = progress()
        with self._followers_lock:
            self._followers = [f for f in self._followers if f is not progress]
            _add_sinks(self._settled, final)
            self._settled_dropped += int(final.get("dropped", 0))

    def _held(self) -> tuple[int, int, dict[str, list[int]]]:
        """(records still unsent, records dropped, per sink [delivered, failed]) over every follower, finished ones
        included."""
        with self._followers_lock:
            followers, sinks = list(self._followers), {name: list(pair) for name, pair in self._settled.items()}
            dropped = self._settled_dropped
        queued = 0
        for progress in followers:
            held = progress()
            queued += int(held.get("queued", 0))
            dropped += int(held.get("dropped", 0))
            _add_sinks(sinks, held)
        return queued, dropped, sinks

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
            if self._in_hand + self._held()[0] < self._last_pending:
                self.report()  # nothing queued (written at once, or dropped): the owner must not wait for it

    def report(self) -> None:
        """Rewrites this process's report for the owner in place (any thread; never raises): one ``pwrite`` of the
        whole document, padded with spaces to the longest written so far, so a reader never sees a stale tail."""
        if not self.mine:
            return
        with self._lock:
            try:
                queued, dropped, counts = self._held()
                pending = self._in_hand + queued
                self._last_pending = pending
                sinks = {name: {"delivered": done, "failed": failed} for name, (done, failed) in counts.items()}
                document = {
                    "pid": self._pid,
                    "logged": self.logged,
                    "pending": pending,
                    "dropped": dropped,
                    "sinks": sinks,
                }
                data = json.dumps(document).encode()
                self._report_length = max(self._report_length, len(data))
                if self._report_descriptor is None:
                    self._report_descriptor = os.open(self._report_path, os.O_RDWR | os.O_CREAT, 0o644)
                os.pwrite(self._report_descriptor, data.ljust(self._report_length), 0)
            except Exception:  # best effort: what the owner cannot confirm it counts as lost
                return


def _add_sinks(into: dict[str, list[int]], progress: Mapping[str, Any]) -> None:
    for sink, counts in (progress.get("sinks") or {}).items():
        pair = into.setdefault(sink, [0, 0])
        pair[0] += int(counts.get("delivered", 0))
        pair[1] += int(counts.get("failed", 0))


_MEMBERSHIPS: dict[str, Membership] = {}
_MEMBERSHIPS_LOCK = threading.Lock()


def membership_of(folder: Path, run_id: str) -> Membership:
    """This process's membership of the run (made on first use; a forked child makes its own)."""
    with _MEMBERSHIPS_LOCK:
        known = _MEMBERSHIPS.get(run_id)
        if known is not None and known.mine and known.open:
            return known
        made = _MEMBERSHIPS[run_id] = Membership(folder, run_id)
        return made


def _reset_after_fork() -> None:
    global _MEMBERSHIPS_LOCK
    _MEMBERSHIPS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
