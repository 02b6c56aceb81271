"""The durable intents of one run's non-idempotent sink (the eval sample table, the training step objects) on a
gateway with ``--state-dir``: what each request carries, written before it leaves, and what became of each record,
so that a gateway killed mid-request and started again never stores a record twice (``_state.py``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ._state import DELIVERED, RELEASED, SENDING, GatewayState, Intent


class SinkIntents:
    """One sink's intents and numbering counters for one run: every change is written before it is believed."""

    def __init__(self, state: GatewayState, run_id: str, sink: str) -> None:
        self.sink = sink
        self._state = state
        self._run_id = run_id
        self._intents: dict[int, Intent] = {}
        #: The sink's numbering counters (rollouts per example, sample id ranges per step), as stored.
        self.counters: dict[str, int] = {}
        self._lock = threading.Lock()

    def restore(self, intents: Mapping[int, Intent], counters: Mapping[str, int]) -> None:
        with self._lock:
            self._intents = dict(intents)
            self.counters = dict(counters)

    def get(self, seq: int | None) -> Intent | None:
        if seq is None:
            return None
        with self._lock:
            return self._intents.get(seq)

    def record(self, changes: Mapping[int, Intent], counters: Mapping[str, int] | None = None) -> None:
        """Write ``changes`` (and counters raised to at least these) durably, then keep them."""
        if not changes and not counters:
            return
        self._state.intended(self._run_id, self.sink, changes, counters)
        with self._lock:
            self._intents.update(changes)
            for key, value in (counters or {}).items():
                self.counters[key] = max(self.counters.get(key, 0), value)

    def forget(self, seqs: Iterable[int]) -> None:
        """The batch holding these records settled (its intents were deleted with it)."""
        with self._lock:
            for seq in seqs:
                self._intents.pop(seq, None)


class RequestIntents:
    """A sink's ``REQUEST_PROGRESS`` for one write: ``seqs[position]`` is the spool seq of the record at that
    position of the batch (None: not durable), ``detail(position)`` what its intent keeps, ``counters(positions)``
    the numbering counters the request consumes. ``carrying`` writes the intents before the request leaves."""

    def __init__(
        self,
        intents: SinkIntents,
        seqs: Mapping[int, int],
        detail: Callable[[int], Mapping[str, Any]],
        counters: Callable[[Iterable[int]], Mapping[str, int]] | None = None,
    ) -> None:
        self._intents = intents
        self._seqs = seqs
        self._detail = detail
        self._counters = counters
        self._sending: set[int] = set()

    def carrying(self, positions: Iterable[int]) -> None:
        self._write(positions, SENDING)

    def delivered(self, positions: Iterable[int]) -> None:
        self._write(positions, DELIVERED)

    def released(self, positions: Iterable[int]) -> None:
        self._write([p for p in positions if p in self._sending], RELEASED)

    def _write(self, positions: Iterable[int], state: str) -> None:
        chosen = [p for p in positions if p in self._seqs]
        if not chosen:
            return
        now = time.time()
        changes = {self._seqs[p]: Intent(state, self._detail(p), now) for p in chosen}
        counters = self._counters(chosen) if state == SENDING and self._counters is not None else None
        self._intents.record(changes, counters)
        if state == SENDING:
            self._sending.update(chosen)
        else:
            self._sending.difference_update(chosen)
