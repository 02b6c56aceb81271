"""Received records on their way to the sinks.

The request thread only queues the record's JSON text (acknowledging fast); the run's uploader thread parses it
into a ``GatewayRecordSpan``, a ``RecordSpan`` over the producer's record mapping, so every in-process exporter
takes it as it is. The sample rows are parsed on first use, by the sinks that need them.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.resources import Resource

from ..processors import RecordProcessor, SinkSlot
from ..projection import build_samples
from ..records import EncodedRecord, RecordSpan, decode_received, is_episode, training_step
from ._defaults import DEFAULT_RUN_QUEUED_BYTES
from ._pool import DeliveryPool, PooledUploader

_logger = logging.getLogger(__name__)

#: Queued-but-undelivered record bytes above which a run answers 503 (its uploads fell behind).
DEFAULT_MAX_QUEUED_BYTES = DEFAULT_RUN_QUEUED_BYTES
_PUT_TIMEOUT_SECONDS = 1.0


@dataclass(frozen=True)
class ReceivedRecord:
    """One ``episode``/``trace`` span as received: the record and its sample rows still as JSON text."""

    name: str
    record_json: str
    samples_json: str | None
    end_time_ns: int
    #: Its seq in the run's durable spool (gateways with ``--state-dir``), settled once delivered.
    seq: int | None = None

    @property
    def size(self) -> int:
        return len(self.record_json) + len(self.samples_json or "")


class GatewayRecordSpan(RecordSpan):
    """A ``RecordSpan`` over a received record mapping, with the producer's v0 rows for the legacy tables."""

    def __init__(
        self,
        received: ReceivedRecord,
        record: Mapping[str, Any],
        resource: Resource,
        encoded: EncodedRecord | None = None,
    ) -> None:
        """``encoded``: the record's encoding cut from the JSON it arrived as (else it is encoded on first use)."""
        super().__init__(record, resource, received.end_time_ns)
        #: Its seq in the run's durable spool (None without ``--state-dir``).
        self.seq = received.seq
        self._encoded = encoded
        self._samples_json = received.samples_json
        self._rows: list[dict[str, Any]] | None = None

    @property
    def has_rows(self) -> bool:
        """The producer sent the record's v0 rows (else an episode's are projected here from the record)."""
        return self._samples_json is not None

    @property
    def sample_rows(self) -> list[dict[str, Any]]:
        """The record's v0 rows as the producer projected them, else projected here from the record; [] for bare
        traces."""
        if self._rows is None:
            if self._samples_json is not None:
                self._rows = _parse_rows(self._samples_json)
            elif is_episode(self.record):
                self._rows = build_samples([self.record])
            else:
                self._rows = []
        return self._rows

    @property
    def train_step(self) -> int | None:
        """The dispatch step of a training episode (``run.work`` of type train), else None."""
        return training_step(self.record)

    @property
    def env_name(self) -> str:
        env = self.record.get("env")
        return str(env.get("id") or "") if isinstance(env, Mapping) else ""


def _parse_rows(text: str | None) -> list[dict[str, Any]]:
    if not text:
        return []
    try:
        rows = json.loads(text)
    except ValueError:
        rows = None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        _logger.warning("a record's sample rows are not a JSON list of objects; it reaches the record sinks only")
        return []
    return rows


def _unreadable(name: str, error: BaseException) -> str:
    if isinstance(error, RecursionError):
        return f"{name} record JSON nested too deeply"
    if isinstance(error, json.JSONDecodeError):
        return f"{name} record that is not valid JSON"
    return f"{name} record that is not a JSON object"


class GatewayRecordProcessor(PooledUploader, RecordProcessor):
    """A run's record processor fed by the receivers: bounded by queued bytes so a run whose uploads fell behind
    pushes back on its senders (``saturated``) instead of growing without limit. With a ``pool`` its deliveries
    run on the gateway's delivery threads (no thread of its own)."""

    def __init__(
        self,
        slots: Sequence[SinkSlot],
        resource: Resource,
        *,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
        thread_name: str = "prime-otel-gateway-run",
        pool: DeliveryPool | None = None,
    ) -> None:
        super().__init__(slots, resource, put_timeout=_PUT_TIMEOUT_SECONDS, thread_name=thread_name)
        self.attach(pool)
        #: Records refused on delivery because their JSON could not be read, by reason.
        self.invalid_reasons: Counter[str] = Counter()
        self._max_queued_bytes = max_queued_bytes
        #: Called with the spool seqs of each delivered batch (set by a run with durable state).
        self.on_delivered: Callable[[list[int]], None] | None = None
        self._queued_bytes = 0
        self._bytes_lock = threading.Lock()

    @property
    def queued_bytes(self) -> int:
        """Record bytes received and not yet delivered."""
        return self._queued_bytes

    @property
    def saturated(self) -> bool:
        return self._queued_bytes >= self._max_queued_bytes

    @property
    def invalid_records(self) -> int:
        return sum(self.invalid_reasons.values())

    def offer(self, name: str, records: list[ReceivedRecord]) -> bool:
        """Queue one request's records of one kind; False when the queue stayed full (or the run is closing):
        then nothing was taken and nothing is counted lost, the sender is told to send them again."""
        size = sum(record.size for record in records)
        with self._bytes_lock:
            self._queued_bytes += size
        if self._lane is not None:
            queued = self.push(name, records)
            if not queued:
                self._release(size)
            return queued
        dropped_before = self.dropped_records
        queued = self._put(name, records)
        if not queued:
            self._release(size)
            with self._lock:
                # The uploader counted them dropped; they are refused instead (the sender retries them).
                self.dropped_records -= self.dropped_records - dropped_before
        return queued

    def _release(self, size: int) -> None:
        with self._bytes_lock:
            self._queued_bytes -= size

    def _deliver(self, items: list[Any]) -> None:
        try:
            spans: list[GatewayRecordSpan] = []
            for received in items:
                try:
                    record, encoded = decode_received(received.record_json)
                    spans.append(GatewayRecordSpan(received, record, self._resource, encoded))
                except (ValueError, TypeError, RecursionError) as exc:
                    reason = _unreadable(received.name, exc)
                    first = reason not in self.invalid_reasons
                    self.invalid_reasons[reason] += 1
                    _logger.log(
                        logging.WARNING if first else logging.DEBUG,
                        "a received %s span carries no valid record (%s); counted invalid",
                        received.name,
                        reason,
                    )
            # Valid JSON can still be no record (a lone surrogate, no id): counted failed on every sink, with why.
            usable = self._prepare(spans)
            if usable:
                self._dispatch_to_slots(usable)
        finally:
            self._release(sum(received.size for received in items))
            seqs = [received.seq for received in items if received.seq is not None]
            if seqs and self.on_delivered is not None:
                self.on_delivered(seqs)
