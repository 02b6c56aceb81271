"""Log calls in progress, so that ``finish()`` starts draining only once every call it did not refuse has queued
its records: a ``log_*`` call racing ``finish()`` is either accepted and delivered, or refused with
``RunFinishedError``; never accepted and then lost."""

from __future__ import annotations

import threading


class Admission:
    def __init__(self) -> None:
        self._init_state()

    def _init_state(self) -> None:
        # Reentrant: a signal handler finishing the run may interrupt this thread inside enter() or leave().
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._open = True
        self._calls: dict[int, int] = {}

    def enter(self) -> bool:
        """Admits one call on this thread; False once ``close()`` has begun."""
        with self._lock:
            if not self._open:
                return False
            me = threading.get_ident()
            self._calls[me] = self._calls.get(me, 0) + 1
            return True

    def leave(self) -> None:
        me = threading.get_ident()
        with self._lock:
            left = self._calls.get(me, 0) - 1
            if left > 0:
                self._calls[me] = left
            else:
                self._calls.pop(me, None)
            if not self._open:
                self._changed.notify_all()  # a close() may be waiting for this call

    def close(self, timeout: float | None) -> bool:
        """Refuses new calls, then waits (at most ``timeout``) for the admitted ones of other threads: a call of
        this thread (a signal handler interrupting it) cannot finish before we return, so it is not waited for."""
        me = threading.get_ident()
        with self._changed:
            self._open = False
            return self._changed.wait_for(lambda: all(thread == me for thread in self._calls), timeout)

    def reset_after_fork(self) -> None:
        """In a forked child only the forking thread exists; calls of the parent's other threads never return here."""
        was_open = self._open
        self._init_state()
        self._open = was_open
