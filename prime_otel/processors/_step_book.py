"""The step book: metric values merged per step on the client, so that a step costs one request.

Trainers log a step's metrics from several threads and calls (loss here, throughput there, a counter of the
run's meter in between), and the platform takes one row per request, at 60 requests a minute. The book keeps one
row per step (later values win per key, as on the platform) and gives it out once the step has been quiet for
``STEP_QUIET_SECONDS`` (the threads of one step log within that) or at the latest ``STEP_MAX_WAIT_SECONDS`` after
its first value, so a row reaches the platform a few seconds after its step at most. A value that arrives for a
step already given out starts a new row with only what is new: the platform merges it into the step's row.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ..records._metric_values import STEP_KEY

STEP_QUIET_SECONDS = 1.0
STEP_MAX_WAIT_SECONDS = 5.0
TIMESTAMP_KEY = "_timestamp"


class _StepRow:
    __slots__ = ("first", "last", "timestamp", "values")

    def __init__(self, now: float) -> None:
        self.values: dict[str, Any] = {}
        self.first = now
        self.last = now
        self.timestamp: float | None = None


class StepBook:
    """Rows merged by step until they are due; rows without a step pass through as they came."""

    def __init__(self, quiet: float = STEP_QUIET_SECONDS, max_wait: float = STEP_MAX_WAIT_SECONDS) -> None:
        self._quiet = quiet
        self._max_wait = max_wait
        self._rows: dict[int, _StepRow] = {}
        self._stepless: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows) + len(self._stepless)

    def merge(self, values: Mapping[str, Any], now: float, step: int | None = None) -> None:
        """Merge ``values`` into their step's row (``step``, else the row's own ``"step"``)."""
        step = values.get(STEP_KEY) if step is None else step
        with self._lock:
            if not isinstance(step, int):
                self._stepless.append(dict(values))
                return
            row = self._rows.get(step)
            if row is None:
                row = self._rows[step] = _StepRow(now)
            row.last = now
            for key, value in values.items():
                if key == TIMESTAMP_KEY:
                    if isinstance(value, (int, float)) and (row.timestamp is None or value > row.timestamp):
                        row.timestamp = float(value)
                elif key != STEP_KEY:
                    row.values[key] = value

    def take_due(self, now: float, *, everything: bool = False) -> list[dict[str, Any]]:
        """The rows due (all of them with ``everything``) in step order, each ``{..., "step", "_timestamp"}``;
        stepless rows first, as logged."""
        with self._lock:
            due = sorted(step for step, row in self._rows.items() if everything or self._is_due(row, now))
            rows, self._stepless = self._stepless, []
            for step in due:
                row = self._rows.pop(step)
                if row.values:
                    stamp = row.timestamp if row.timestamp is not None else now
                    rows.append({**row.values, STEP_KEY: step, TIMESTAMP_KEY: stamp})
        return rows

    def next_due(self) -> float | None:
        """When the next row falls due (``now`` units), or None when the book is empty."""
        with self._lock:
            if self._stepless:
                return 0.0
            if not self._rows:
                return None
            return min(min(row.last + self._quiet, row.first + self._max_wait) for row in self._rows.values())

    def _is_due(self, row: _StepRow, now: float) -> bool:
        return now - row.last >= self._quiet or now - row.first >= self._max_wait
