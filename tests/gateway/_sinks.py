"""Stand-ins for the platform side of a gateway's run pipelines, for tests that drive a ``RunRegistry`` in process:
a sink whose writes wait at a gate (uploads stuck on a slow platform), a backend that records the closes, and the
pipelines factory that serves both to every run."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource

from prime_otel._sink import SinkStats
from prime_otel.gateway._sinks import RunPipeline
from prime_otel.gateway._spans import GatewayRecordProcessor
from prime_otel.processors import SinkSlot
from prime_otel.records import record_of


class GatedSink:
    """Keeps what it is given; every write first waits (at most 30 s) until the test sets ``gate``, which starts
    set with ``opened=True``."""

    name = "gated"
    replay_safe = False
    reports_requests = False
    quiet_off_reason = None

    def __init__(self, *, opened: bool = False) -> None:
        self.enabled = True
        self.stats = SinkStats()
        self.gate = threading.Event()
        if opened:
            self.gate.set()
        self.written: list[Any] = []

    @property
    def records(self) -> list[Any]:
        """The records of the items written (the producers' mappings)."""
        return [record_of(item) for item in self.written]

    def write(self, items: Sequence[Any]) -> None:
        self.gate.wait(30)
        self.written.extend(items)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None

    def reset_after_fork(self) -> None:
        return None


class ClosesBackend:
    """Records the closes the registry makes (the platform side is not what these tests look at)."""

    def __init__(self) -> None:
        self.finalized: list[tuple[str, str]] = []

    def update(self, run_id: str, **kwargs: Any) -> None:
        return None

    def finalize(self, run_id: str, status: Any, **kwargs: Any) -> None:
        self.finalized.append((run_id, status.value))


class GatedPipelines:
    """Every run's records go to one ``GatedSink`` through a processor bounded at ``max_queued_bytes``."""

    def __init__(self, max_queued_bytes: int = 10**9) -> None:
        self.sink = GatedSink()
        self.backend = ClosesBackend()
        self._max_queued_bytes = max_queued_bytes

    def open(self, run_id: str, kind: str, resource: Resource) -> RunPipeline:
        processor = GatewayRecordProcessor([SinkSlot(self.sink)], resource, max_queued_bytes=self._max_queued_bytes)
        return RunPipeline(processor=processor, metrics=None, backend=self.backend, traces=None)  # type: ignore[arg-type]
