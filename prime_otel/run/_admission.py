"""Log calls in progress, so that ``finish()`` starts draining only once every call it did not refuse has queued
its records: a ``log_*`` call racing ``finish()`` is either accepted and delivered, or refused with
``RunFinishedError``; never accepted and then lost."""

from __future__ import annotations

import threading
from collections import Counter


class Admission:
    def __init__(self) -> None:
        self._changed = threading.Condition(threading.RLock())
        self._open = True
        self._calls: Counter[int] = Counter()

    def enter(self) -> bool:
        """Admits one call on this thread; False once ``close()`` has begun."""
        with self._changed:
            if not self._open:
                return False
            self._calls[threading.get_ident()] += 1
            return True

    def leave(self) -> None:
        me = threading.get_ident()
        with self._changed:
            self._calls[me] -= 1
            if self._calls[me] <= 0:
                del self._calls[me]
            self._changed.notify_all()

    def close(self, timeout: float | None) -> bool:
        """Refuses new calls, then waits (at most ``timeout``) for the admitted ones of other threads: a call of
        this thread (a signal handler interrupting it) cannot finish before we return, so it is not waited for."""
        me = threading.get_ident()
        with self._changed:
            self._open = False
            return self._changed.wait_for(lambda: all(thread == me for thread in self._calls), timeout)

    def reset_after_fork(self) -> None:
        """In a forked child only the forking thread exists; calls of the parent's other threads never return here."""
        self._changed = threading.Condition(threading.RLock())
        self._calls = Counter()
