"""Exit paths that close a run nobody closed: atexit (crashed) and termination signals (crashed, then chained).

SIGINT is left to Python so Ctrl-C arrives as ``KeyboardInterrupt`` (cancelled inside ``with run:``).
Handlers chain to whatever the application installed before and are restored at finish, but only while
the run's own handler is still the installed one.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

SIGNAL_FINISH_TIMEOUT_SECONDS = 5.0
_HANDLED_SIGNALS = tuple(
    s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None
)

SignalHandler = Callable[[int, FrameType | None], Any] | int | None


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

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in _HANDLED_SIGNALS:
            try:
                self._displaced[signum] = signal.getsignal(signum)
                signal.signal(signum, self._handler)
            except (ValueError, OSError):
                self._displaced.pop(signum, None)

    def restore(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        displaced, self._displaced = self._displaced, {}
        for signum, previous in displaced.items():
            if signal.getsignal(signum) is self._handler:
                signal.signal(signum, previous if previous is not None else signal.SIG_DFL)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        previous = self._displaced.get(signum, signal.SIG_DFL)
        self._on_signal(signum)
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_IGN:
            return
        else:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
