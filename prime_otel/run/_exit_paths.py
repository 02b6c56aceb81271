"""Exit paths that close a run nobody closed: atexit, and the termination signals (SIGTERM, SIGHUP).

One process-wide :class:`SignalRouter` handles the termination signals for every open run of the process,
whichever thread opened it, and cooperates with the application:

- an application handler (installed before or after ``init``) runs first, with the runs still open, and
  decides: if it returns, the runs go on; if it raises (``KeyboardInterrupt`` for a graceful stop,
  ``SystemExit`` after a checkpoint), the exception unwinds as usual (``with run:`` ends the run as it says)
  and a run still open when the process exits ends the same way;
- without one (the default disposition) every open run is closed as crashed within
  ``SIGNAL_FINISH_TIMEOUT_SECONDS`` (a joined worker drains what it logged), then the signal does what the
  default would: the process dies by it;
- ``SIG_IGN`` stays ignored: the router never installs itself over it;
- a signal that arrives while a run is being closed on the main thread waits until that closing is done
  (the status write is never cut short), then is handled as above.

``signal.signal`` works on the main thread only, so the router installs itself when ``prime_otel`` is imported
on the main thread (and again at each ``init`` there, on top of a handler the application set meanwhile).
While no run is open it is transparent: the signal does what the displaced disposition does. When the last run
closes, an application handler it displaced is put back (from the main thread; from another thread at the next
occasion there: the next ``init`` or the next delivery).

SIGINT is left to Python, so Ctrl-C arrives as ``KeyboardInterrupt`` (cancelled inside ``with run:``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, Protocol

from .._fork import register_for_fork_reset
from .._types import RunStatus
from ._containment import describe

SIGNAL_FINISH_TIMEOUT_SECONDS = 5.0
_HANDLED_SIGNALS = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)

SignalHandler = Callable[[int, FrameType | None], Any] | int | None


def exit_status(error: BaseException | None) -> tuple[RunStatus, str | None]:
    """The status (and error message) of a run whose code ended with ``error`` (None: it returned): ``sys.exit(0)``
    is a clean exit, Ctrl-C and a cancelled task cancel the run, anything else fails it."""
    import asyncio

    if error is None or (isinstance(error, SystemExit) and error.code in (0, None)):
        return RunStatus.COMPLETED, None
    if isinstance(error, SystemExit):
        code = error.code
        return RunStatus.FAILED, f"SystemExit: exit code {code}" if isinstance(code, int) else f"SystemExit: {code}"
    if isinstance(error, (KeyboardInterrupt, asyncio.CancelledError)):
        return RunStatus.CANCELLED, "interrupted"
    return RunStatus.FAILED, describe(error)


class AtexitHook:
    """Also runs in a forked child that exits normally: the child's run (no longer the lifecycle owner) drains
    what the child logged and closes nothing on the platform."""

    def __init__(self, on_exit: Callable[[], None]) -> None:
        self._on_exit = on_exit
        atexit.register(self._on_exit)

    def unregister(self) -> None:
        atexit.unregister(self._on_exit)


class SignalTarget(Protocol):
    def close_for_signal(self, signum: int, timeout: float) -> None:
        """Close (or, for a joined worker, drain) the run because ``signum`` arrived with the default disposition."""


class SignalRouter:
    """The process's one handler per termination signal; it knows every open run of the process."""

    def __init__(self) -> None:
        # Bound once: every attribute access makes a new bound method, which would never compare identical.
        self._handler = self._handle
        self._displaced: dict[int, SignalHandler] = {}
        # No lock is taken by the handler: it runs on the main thread between any two bytecodes, so a lock held
        # there by a registration would deadlock it. Fields are replaced whole, never mutated in place.
        self._targets: tuple[SignalTarget, ...] = ()
        self._lock = threading.RLock()
        self._put_back_pending = False
        self._closing_depth = 0
        self._deferred: tuple[int, ...] = ()
        #: What the application's handler raised from a signal: runs still open at exit end as it says.
        self.raised_by_handler: BaseException | None = None

    @property
    def installed(self) -> list[int]:
        return [signum for signum in _HANDLED_SIGNALS if _current(signum) is self._handler]

    def install(self) -> None:
        """On the main thread: put the router in front of whatever handles each signal now (never ``SIG_IGN``)."""
        if not _on_main_thread():
            return
        self._put_back_pending = False
        displaced = dict(self._displaced)
        for signum in _HANDLED_SIGNALS:
            try:
                current = signal.getsignal(signum)
                if current is self._handler or current == signal.SIG_IGN:
                    continue  # ours already, or the application chose to ignore it: a run must not make it fatal
                displaced[signum] = current
                self._displaced = dict(displaced)
                signal.signal(signum, self._handler)
            except (ValueError, OSError):
                displaced.pop(signum, None)
                self._displaced = dict(displaced)

    def register(self, target: SignalTarget) -> None:
        with self._lock:
            self._targets = (*self._targets, target)
        self.install()

    def unregister(self, target: SignalTarget) -> None:
        with self._lock:
            self._targets = tuple(t for t in self._targets if t is not target)
            empty = not self._targets
        if not empty:
            return
        if _on_main_thread():
            self._put_back()
        else:
            self._put_back_pending = True

    @contextlib.contextmanager
    def closing(self) -> Iterator[None]:
        """Around a run's closing: on the main thread, signals arriving meanwhile wait until it is done (the router
        goes in front of any handler for that, so an application handler cannot cut the closing short either)."""
        if not _on_main_thread():
            yield
            return
        self.install()
        self._closing_depth += 1
        try:
            yield
        finally:
            self._closing_depth -= 1
        if self._closing_depth == 0:
            self._handle_deferred()

    def _put_back(self) -> None:
        """An application handler the router displaced goes back; a displaced default stays behind the router."""
        self._put_back_pending = False
        displaced = dict(self._displaced)
        for signum, previous in list(displaced.items()):
            if not callable(previous):
                continue
            with contextlib.suppress(ValueError, OSError):
                if signal.getsignal(signum) is self._handler:
                    signal.signal(signum, previous)
            del displaced[signum]
        self._displaced = displaced

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._closing_depth:
            self._deferred = (*self._deferred, signum)
            return
        self._closing_depth += 1
        try:
            self._dispatch(signum, frame)
        finally:
            self._closing_depth -= 1
        self._handle_deferred()

    def _handle_deferred(self) -> None:
        """Signals that waited for a closing, handled now by whatever handles them now (the router, or the
        application's handler it has put back since)."""
        while self._deferred and not self._closing_depth:
            signum, self._deferred = self._deferred[0], self._deferred[1:]
            current = _current(signum)
            if current is self._handler:
                self._handle(signum, None)
            elif callable(current):
                current(signum, None)
            elif current != signal.SIG_IGN:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

    def _dispatch(self, signum: int, frame: FrameType | None) -> None:
        previous = self._displaced.get(signum, signal.SIG_DFL)
        if self._put_back_pending and not self._targets:
            self._put_back()
        if callable(previous):
            try:
                previous(signum, frame)
            except BaseException as raised:
                self.raised_by_handler = raised
                raise
            return
        if previous == signal.SIG_IGN:
            return
        deadline = time.monotonic() + SIGNAL_FINISH_TIMEOUT_SECONDS
        for target in reversed(self._targets):
            with contextlib.suppress(Exception):
                target.close_for_signal(signum, max(0.0, deadline - time.monotonic()))
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def reset_after_fork(self) -> None:
        """In a forked child the runs stay registered (they now only drain); a closing under way is the parent's."""
        self._lock = threading.RLock()
        self._closing_depth = 0
        self._deferred = ()
        self.raised_by_handler = None


def _current(signum: int) -> SignalHandler:
    try:
        return signal.getsignal(signum)
    except (ValueError, OSError):
        return None


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


SIGNALS = SignalRouter()
register_for_fork_reset(SIGNALS)
# Installed now, while the importing thread is (usually) the main one: a run opened later on another thread
# could not install it, and would never be closed by a SIGTERM.
SIGNALS.install()
