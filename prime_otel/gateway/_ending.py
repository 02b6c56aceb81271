"""When a run received over OTLP is over, and with which status.

Every producer process ends its part with a ``run.end`` marker announcing what it sent. The rule:

- The ranks expected are ``0 … world_size - 1`` (the largest ``prime.run.world_size`` any of the run's
  resources carried) plus every rank seen. The run is complete once each expected rank sent its marker and,
  for every marker, at least the announced episodes, traces and metric rows arrived.
- The status is the owner's (``prime.run.owner``: the process that created the run, rank 0): a non-owner's
  failed or crashed marker does not change it, as in-process a joined rank never closes the run. No owner
  marker at completion (every process joined a run owned elsewhere): the sinks are closed and the run is left
  to its owner. The summary and error are the owner's.
- Lease: no data and no marker for ``lease_seconds`` closes the run anyway: with the owner's status when its
  marker arrived (what never arrived is counted missing), else as crashed ("no data from the producer for N s")
  — how a SIGKILLed producer is caught.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import _conventions as conv
from .._types import RunStatus

EPISODES = "episodes"
TRACES = "traces"
METRIC_ROWS = "metric_rows"
KINDS = (EPISODES, TRACES, METRIC_ROWS)
SPAN_KINDS = {conv.EPISODE_SPAN: EPISODES, conv.TRACE_SPAN: TRACES}
#: Summaries nest shallowly; a deeper one would only serve to break the JSON tools downstream.
MAX_SUMMARY_DEPTH = 32
MAX_ERROR_CHARS = 4000
_MAX_COUNT_DIGITS = 19
_COUNT_ATTRIBUTES = {EPISODES: conv.END_EPISODES, TRACES: conv.END_TRACES, METRIC_ROWS: conv.END_METRIC_ROWS}


@dataclass(frozen=True)
class EndMarker:
    """One process's ``run.end``: how it ended and what it sent."""

    rank: int
    status: RunStatus
    error: str | None
    summary: dict[str, Any]
    counts: Mapping[str, int]
    owner: bool
    summary_problem: str | None = None

    @classmethod
    def from_attributes(cls, rank: int, attributes: Mapping[str, Any]) -> EndMarker:
        """``ValueError`` naming the problem when a count is no non-negative integer (such a marker is counted
        invalid and not acted on: the run then ends at its lease). A summary that is no JSON object, or nests too
        deep, is dropped (``summary_problem`` says why): the marker still ends the rank."""
        error = attributes.get(conv.END_ERROR)
        try:
            status = RunStatus(str(attributes.get(conv.END_STATUS, "")).lower())
        except ValueError:
            status = RunStatus.FAILED
            error = error or f"the run.end marker carried no valid status ({attributes.get(conv.END_STATUS)!r})"
        try:
            summary, summary_problem = _summary(attributes.get(conv.END_SUMMARY_JSON)), None
        except ValueError as exc:
            summary, summary_problem = {}, f"{exc} (dropped; the marker is kept)"
        if status is RunStatus.RUNNING:
            status, error = RunStatus.FAILED, error or "the run.end marker said the run is still running"
        return cls(
            rank=rank,
            status=status,
            error=str(error)[:MAX_ERROR_CHARS] if error else None,
            summary=summary,
            summary_problem=summary_problem,
            counts={kind: _count(attributes.get(name)) for kind, name in _COUNT_ATTRIBUTES.items()},
            owner=attributes.get(conv.END_OWNER) is True,
        )


def _summary(text: Any) -> dict[str, Any]:
    if text is None or text == "":
        return {}
    if not isinstance(text, str):
        raise ValueError("a run.end summary that is not a JSON string")
    try:
        summary = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError("a run.end summary that is not valid JSON") from None
    if not isinstance(summary, dict) or not _shallow(summary, MAX_SUMMARY_DEPTH):
        raise ValueError(f"a run.end summary that is not a JSON object nested at most {MAX_SUMMARY_DEPTH} deep")
    return summary


def _shallow(value: Any, limit: int) -> bool:
    """Whether ``value`` nests at most ``limit`` containers deep (checked without recursion)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return False
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return True


def _count(value: Any) -> int:
    """An announced record count: absent is 0; anything but a non-negative integer (also as an integral float or
    a decimal string, after a JSON hop) is refused."""
    if value is None:
        return 0
    digits = isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= _MAX_COUNT_DIGITS
    if digits or (isinstance(value, float) and value.is_integer()):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise ValueError("a run.end record count that is not a non-negative integer")
    return value


@dataclass(frozen=True)
class Ending:
    """How to close a run: ``status`` None leaves the run on the platform to an owner that did not report here."""

    status: RunStatus | None
    error: str | None
    summary: dict[str, Any] | None
    missing: int
    reason: str


class EndTracker:
    """Markers, per-rank arrivals and the lease of one run; ``decide`` applies the module's rule."""

    def __init__(self, lease_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.lease_seconds = lease_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._last_activity = clock()
        self._world_size = 1
        self._ranks: set[int] = set()
        self._received: dict[int, dict[str, int]] = defaultdict(lambda: dict.fromkeys(KINDS, 0))
        self._markers: dict[int, EndMarker] = {}

    def touch(self, rank: int, world_size: int) -> None:
        with self._lock:
            self._last_activity = self._clock()
            self._ranks.add(rank)
            self._world_size = max(self._world_size, world_size)

    def count(self, rank: int, kind: str, records: int) -> None:
        with self._lock:
            self._received[rank][kind] += records

    def mark(self, marker: EndMarker) -> None:
        with self._lock:
            self._markers[marker.rank] = marker

    def restore(
        self, world_size: int, ranks: list[int], received: dict[int, dict[str, int]], markers: list[EndMarker]
    ) -> None:
        """A restarted gateway's view of the run as it was; the lease starts again now."""
        with self._lock:
            self._world_size = max(self._world_size, world_size)
            self._ranks.update(ranks)
            for rank, counts in received.items():
                for kind, count in counts.items():
                    self._received[rank][kind] = count
            for marker in markers:
                self._markers[marker.rank] = marker

    @property
    def world(self) -> tuple[int, list[int]]:
        with self._lock:
            return self._world_size, sorted(self._ranks)

    def decide(self) -> Ending | None:
        """The ending now due, if any."""
        with self._lock:
            owner = next((marker for marker in self._markers.values() if marker.owner), None)
            missing = sum(
                max(0, marker.counts[kind] - self._received[rank][kind])
                for rank, marker in self._markers.items()
                for kind in KINDS
            )
            expected = set(range(self._world_size)) | self._ranks
            if expected <= self._markers.keys() and missing == 0:
                return self._owners_ending(owner, 0, "every rank's records and end marker arrived")
            idle = self._clock() - self._last_activity
            if idle < self.lease_seconds:
                return None
            if owner is not None:
                reason = f"the lease ran out with {missing} announced records and ranks "
                reason += f"{sorted(expected - self._markers.keys())} missing"
                return self._owners_ending(owner, missing, reason)
            error = f"no data from the producer for {self.lease_seconds:g} s"
            return Ending(RunStatus.CRASHED, error, None, missing, error)

    @staticmethod
    def _owners_ending(owner: EndMarker | None, missing: int, reason: str) -> Ending:
        if owner is None:
            return Ending(None, None, None, missing, reason + "; no owner marker, the run is left to its owner")
        return Ending(owner.status, owner.error, dict(owner.summary), missing, reason)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "world_size": self._world_size,
                "ranks": sorted(self._ranks),
                "received": {str(rank): dict(counts) for rank, counts in sorted(self._received.items())},
                "markers": {
                    str(rank): {
                        "status": marker.status.value,
                        "owner": marker.owner,
                        "counts": dict(marker.counts),
                        "error": marker.error,
                    }
                    for rank, marker in sorted(self._markers.items())
                },
                "idle_seconds": round(self._clock() - self._last_activity, 3),
            }
