"""The delivery report: per sink, what reached the platform and what did not, and whether the run is closed.

It is the truth or it says what it does not know: a sink is ``ok`` only when every record meant for it
arrived, and a terminal status is claimed only when the platform confirmed it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class Closure(str, Enum):
    """Where the run's terminal status stands once this process is done with it."""

    #: The run is still live (a report read before ``finish()``).
    OPEN = "open"
    #: The platform answered the closing call: it shows the run closed.
    CONFIRMED = "confirmed"
    #: Closing was tried and the platform did not confirm it (the run may still show as running).
    NOT_CONFIRMED = "not_confirmed"
    #: The platform cannot hold this status (an older deployment): it is recorded in the run's metadata.
    RECORDED_IN_METADATA = "recorded_in_metadata"
    #: An attached run ended without completing: its status belongs to the launcher that owns it.
    LEFT_TO_LAUNCHER = "left_to_launcher"
    #: This process only logged into a run another process owns (a forked child, another rank).
    LEFT_TO_OWNER = "left_to_owner"
    #: OTLP transport: the ``run.end`` marker was handed over; the gateway closes the run.
    HANDED_TO_GATEWAY = "handed_to_gateway"
    #: Offline: the status is written in the run's folder (``prime-otel sync`` carries it to the platform).
    WRITTEN_TO_FOLDER = "written_to_folder"
    #: A disabled run: nothing is tracked anywhere.
    NOT_TRACKED = "not_tracked"

    @property
    def settled(self) -> bool:
        """Nothing about the run's status is left for this process (or a sync of its folder) to do."""
        return self not in (Closure.OPEN, Closure.NOT_CONFIRMED, Closure.RECORDED_IN_METADATA)


@dataclass(frozen=True)
class SinkReport:
    sink: str
    delivered: int
    failed: int
    dropped: int
    skipped: int
    requests: int
    bytes: int
    state: str
    spooled: int = 0
    replayed: int = 0
    pending: int = 0
    possibly_missing: int = 0
    # Why records failed on this sink: a short reason (kind of problem) -> how many records.
    failure_reasons: dict[str, int] = field(default_factory=dict)
    # Why records reached no sink (they are counted in ``dropped`` on every sink of one uploader).
    dropped_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not (self.failed or self.dropped or self.pending or self.possibly_missing)

    def problems(self) -> list[str]:
        """What keeps this sink from being complete, each with its reasons."""
        found = []
        if self.failed:
            found.append(f"{self.failed} failed{_reasons(self.failure_reasons)}")
        if self.dropped:
            found.append(f"{self.dropped} dropped{_reasons(self.dropped_reasons)}")
        if self.pending:
            found.append(f"{self.pending} still spooled")
        if self.possibly_missing:
            found.append(f"{self.possibly_missing} possibly missing")
        return found

    def line(self) -> str:
        text = (
            f"{self.sink:<13} delivered {self.delivered:>7}  failed {self.failed:>5}  dropped {self.dropped:>5}  "
            f"requests {self.requests:>5}  bytes {_human_bytes(self.bytes):>9}  "
        )
        problems = self.problems()
        if problems:
            text += "NOT COMPLETE: " + "; ".join(problems)
            if self.state != "ok":
                text += f" (sink {self.state})"
        else:
            text += f"({self.state})"
        if self.spooled:
            text += f"  [spooled {self.spooled}, replayed {self.replayed}]"
        return text


@dataclass(frozen=True)
class WorkerTally:
    """What worker processes logged into the run, as their reports to the owner say."""

    processes: int = 0
    logged: int = 0
    delivered: int = 0
    #: Worker pid -> records it logged that did not reach every sink before the run closed.
    lost_by_worker: dict[int, int] = field(default_factory=dict)

    @property
    def lost(self) -> int:
        return sum(self.lost_by_worker.values())

    def line(self) -> str:
        text = f"workers: {self.processes} processes logged {self.logged} records: {self.delivered} delivered"
        if self.lost:
            text += f", {self.lost} LOST (" + ", ".join(f"pid {p}: {n}" for p, n in self.lost_by_worker.items()) + ")"
        return text


@dataclass(frozen=True)
class DeliveryReport:
    run_id: str
    url: str | None
    status: str
    sinks: tuple[SinkReport, ...]
    closure: Closure = Closure.OPEN
    #: Why closing was not confirmed (the error of the closing call).
    close_error: str | None = None
    #: The run's folder, when it has one a ``prime-otel sync`` can work from.
    folder: str | None = None
    #: Facts about the run's spool and folder a reader needs (e.g. a spool that filled its disk).
    notes: tuple[str, ...] = ()
    #: Records other processes (pool workers, forked children, spawned helpers) logged into this run.
    workers: WorkerTally = field(default_factory=WorkerTally)

    @property
    def records_complete(self) -> bool:
        """Every record reached every sink it was meant for (those the run's workers logged too)."""
        return all(s.complete for s in self.sinks) and not self.workers.lost

    @property
    def complete(self) -> bool:
        """Every record arrived and the run's terminal status is settled (confirmed by the platform when this
        process owns the run online)."""
        return self.records_complete and self.closure.settled

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "url": self.url,
            "status": self.status,
            "complete": self.complete,
            "closure": self.closure.value,
            "close_error": self.close_error,
            "folder": self.folder,
            "notes": list(self.notes),
            "sinks": [{**asdict(s), "complete": s.complete} for s in self.sinks],
            "workers": {**asdict(self.workers), "lost": self.workers.lost},
        }

    @property
    def sync_command(self) -> str | None:
        return f"prime-otel sync {self.folder}" if self.folder else None

    def render(self) -> str:
        lines = [self._head(), *("  " + s.line() for s in self.sinks), *("  " + note for note in self.notes)]
        if self.workers.processes:
            lines.append("  " + self.workers.line())
        if self.complete:
            lines.append("  complete: every record reached every sink it was meant for")
        else:
            lines += ["  NOT COMPLETE:", *("    " + step for step in self._next_steps())]
        return "\n".join(lines)

    def _head(self) -> str:
        run, status = f"Run {self.run_id}", self.status
        at = f": {self.url}" if self.url else ""
        heads = {
            Closure.OPEN: f"{run} is still running{at}",
            Closure.CONFIRMED: f"{run} {status}{at}",
            Closure.NOT_CONFIRMED: (
                f"{run} is NOT closed: closing it as {status} was not confirmed ({self.close_error}); "
                f"it may still show as running{at}"
            ),
            Closure.RECORDED_IN_METADATA: (
                f"{run} ended {status}, but this platform cannot mark an evaluation {status}: the status is "
                f"recorded under metadata.prime_runs and the run keeps showing as running{at}"
            ),
            Closure.LEFT_TO_LAUNCHER: (
                f"{run} ended {status} here; it is attached, so its status on the platform is left to the "
                f"launcher that owns it{at}"
            ),
            Closure.LEFT_TO_OWNER: f"{run}: this process's part ended ({status}); the process that owns the run "
            "closes it",
            Closure.HANDED_TO_GATEWAY: f"{run} {status}: the run.end marker went to the gateway, which closes the run",
            Closure.WRITTEN_TO_FOLDER: f"{run} {status} (offline), written to {self.folder}; upload it with: "
            f"{self.sync_command}",
            Closure.NOT_TRACKED: f"{run} {status} (disabled: nothing was tracked)",
        }
        return heads[self.closure]

    def _next_steps(self) -> list[str]:
        steps = []
        spooled = {s.sink: s.pending for s in self.sinks if s.pending}
        needs_closing = self.closure is Closure.NOT_CONFIRMED
        if spooled:
            what = ", ".join(f"{sink} {count}" for sink, count in spooled.items())
            action = "deliver them and close the run" if needs_closing and self.folder else "deliver them"
            steps.append(f"records still in the spool ({what}): {action} with: {self.sync_command}")
        lost = {s.sink: s.failed for s in self.sinks if s.failed}
        if lost:
            what = ", ".join(f"{sink} {count}" for sink, count in lost.items())
            steps.append(f"records failed ({what}): they are not on the platform and no sync brings them back")
        dropped = {s.sink: s.dropped for s in self.sinks if s.dropped}
        if dropped:
            what = ", ".join(f"{sink} {count}" for sink, count in dropped.items())
            steps.append(f"records dropped before reaching the sink ({what}): no sync brings them back")
        missing = {s.sink: s.possibly_missing for s in self.sinks if s.possibly_missing}
        if missing:
            what = ", ".join(f"{sink} {count}" for sink, count in missing.items())
            steps.append(
                f"records possibly missing ({what}): a request failed ambiguously and is never resent; "
                "check the run on the platform"
            )
        if self.workers.lost:
            steps.append(
                f"records logged by worker processes did not all arrive ({self.workers.lost}): a worker ended, or was "
                "still sending when the run closed, before they reached every sink"
            )
        if needs_closing and not spooled:
            if self.folder:
                steps.append(f"close the run with: {self.sync_command}")
            else:
                steps.append("close the run on the platform" + (f": {self.url}" if self.url else ""))
        if self.closure is Closure.RECORDED_IN_METADATA:
            steps.append("the platform cannot show this status; read it from the run's metadata.prime_runs")
        return steps


def _reasons(reasons: dict[str, int]) -> str:
    if not reasons:
        return ""
    return " (" + ", ".join(f"{reason}: {count}" for reason, count in reasons.items()) + ")"


def _human_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{count} B"
