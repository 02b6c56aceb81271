"""Exit paths that close a run nobody closed: atexit (crashed) and termination signals (crashed, then chained).

SIGINT is left to Python so Ctrl-C arrives as ``KeyboardInterrupt`` (cancelled inside ``with run:``).
A signal the application ignores (``SIG_IGN`` before ``init``) stays ignored: the run installs nothing for it.
Handlers chain to whatever the application installed before and are restored at finish, but only while
the run's own handler is still the installed one. ``signal.signal`` works on the main thread only: a run
finished on another thread disarms its handler at once (it then only chains to the displaced one, closing
nothing) and the handler is put back from the main thread at the next occasion: the next ``init``, or the
next delivery of the signal.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

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


class SignalChain:
    """Installs one handler per termination signal that crashes the run and then defers to the displaced one."""

    def __init__(self, on_signal: Callable[[int], None]) -> None:
        self._on_signal = on_signal
        # Bound once: every attribute access makes a new bound method, which would never compare identical.
        self._handler = self._handle
        self._displaced: dict[int, SignalHandler] = {}
        # No lock: the handler runs on the main thread between any two bytecodes, so a lock held there by
        # install() or restore() would deadlock it. Each field is replaced whole, never mutated in place.
        self._armed = False

    @property
    def installed(self) -> list[int]:
        """The signals this chain's handler was installed for and not put back yet."""
        return list(self._displaced)

    def install(self) -> None:
        if not _on_main_thread():
            return
        _DISARMED.put_back_all()
        displaced: dict[int, SignalHandler] = {}
        for signum in _HANDLED_SIGNALS:
            try:
                current = signal.getsignal(signum)
                if current == signal.SIG_IGN:
                    continue  # the application chose to ignore it; a run must not make it fatal
                displaced[signum] = current
                self._displaced = dict(displaced)
                signal.signal(signum, self._handler)
            except (ValueError, OSError):
                displaced.pop(signum, None)
                self._displaced = dict(displaced)
        self._armed = True

    def restore(self) -> None:
        """From now on the handler closes nothing; it is put back now on the main thread, later otherwise."""
        self._armed = False
        if _on_main_thread():
            self._put_back()
        elif self.installed:
            _DISARMED.add(self)

    def _put_back(self) -> None:
        displaced, self._displaced = self._displaced, {}
        for signum, previous in displaced.items():
            if signal.getsignal(signum) is self._handler:
                signal.signal(signum, previous if previous is not None else signal.SIG_DFL)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        previous = self._displaced.get(signum, signal.SIG_DFL)
        if self._armed:
            self._on_signal(signum)
        # Python runs signal handlers on the main thread, so the table can be put back here.
        self._put_back()
        _DISARMED.discard(self)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_IGN:
            return
        else:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)


class _DisarmedChains:
    """Chains whose run finished off the main thread, waiting for the main thread to put their handlers back."""

    def __init__(self) -> None:
        self._chains: list[SignalChain] = []
        # Reentrant: a signal handler on the main thread may call in while install() holds it.
        self._lock = threading.RLock()

    def add(self, chain: SignalChain) -> None:
        with self._lock:
            self._chains.append(chain)

    def discard(self, chain: SignalChain) -> None:
        with self._lock:
            self._chains = [c for c in self._chains if c is not chain]

    def put_back_all(self) -> None:
        """Newest first, so each chain finds its own handler installed and puts back what it displaced."""
        with self._lock:
            chains, self._chains = self._chains, []
        for chain in reversed(chains):
            chain._put_back()


_DISARMED = _DisarmedChains()


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
