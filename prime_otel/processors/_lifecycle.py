"""The run's lifecycle at provider shutdown: registered after the record processor, so it closes the run on
the platform only once the records drained (or their budget ran out), and only in the owning process."""

from __future__ import annotations

import os
from collections.abc import Callable

from opentelemetry.sdk.trace import SpanProcessor


class RunLifecycleProcessor(SpanProcessor):
    def __init__(self, close_run: Callable[[], None], owner_pid: int | None = None) -> None:
        self._close_run = close_run
        self.owner_pid = os.getpid() if owner_pid is None else owner_pid
        self._done = False

    def shutdown(self) -> None:
        # Forked children and spawned helpers shut their providers down too; only the owner closes the run.
        if self._done or os.getpid() != self.owner_pid:
            return
        self._done = True
        self._close_run()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
