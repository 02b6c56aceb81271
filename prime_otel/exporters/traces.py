"""Prime Traces, the system of record: stamped JSONL through the ``prime-traces`` client.

Uploads are content-addressed (the idempotency key is the digest of the exact bytes), so every retry,
ambiguous or not, is safe: the service replays the earlier receipt instead of storing twice.

One record costs only itself. A line the service would refuse for what it is (over one of the contract's upload
limits, a duplicate member trace id) is refused here before sending; an upload the service
still rejects as a whole (400) is split and the halves resent until only the rejected lines are left. Either way
the record is counted failed with the service's code and every other line goes through. Episodes and bare traces
of one batch go out in uploads of their own line format.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from prime_traces import Batch, LineFormat, TracesClient, UploadReceipt
from prime_traces.batching import MAX_LINE_BYTES
from prime_traces.traces import retry_delay
from pydantic import BaseModel

from .._attempts import SENDER_WAIT
from .._conventions import EPISODE_SPAN
from .._sink import SinkWriteError
from .._types import RunKind
from ..client import metered_requests, suppressed_instrumentation, traces_client
from ..errors import (
    APIError,
    ForbiddenError,
    RetryableAPIError,
    TraceTooLargeError,
    TransportError,
    ValidationRejectedError,
)
from ..records import RecordSpan, field_of, why_unencodable
from ._base import RecordSink

_logger = logging.getLogger(__name__)

SERVICE_NOT_ENABLED = "service_not_enabled"
_KEPT_RECEIPTS = 100
# 400 codes about the request as a whole: any part of it would be refused the same way, so it is never split.
_REQUEST_CODES = frozenset(
    {"invalid_metadata", "unsupported_schema_version", "invalid_idempotency_key", "digest_mismatch"}
)

TracesClientFactory = Callable[[], TracesClient]
#: How long the sink's lane waits for more records before it uploads: a producer logging one episode per call at a
#: high rate costs a few uploads a second instead of one per call.
TRACES_LINGER_SECONDS = 0.2
#: Attempts of one upload (the first and its retries after a 429, 5xx or transport failure).
UPLOAD_ATTEMPTS = 5


def _wait_to_retry(error: Exception, attempt: int) -> bool:
    """Wait before retry ``attempt`` (0-based) as prime-traces would, through the sender's wait (so a run that is
    finishing gives the retry up instead of sleeping past its deadline); False when the retry is given up."""
    delay = retry_delay(error, attempt)
    wait = SENDER_WAIT.get()
    if wait is None:
        time.sleep(delay)
        return True
    return wait(delay, time.sleep)


def upload_context(run_type: RunKind, *, framework: str | None = None, model: str | None = None) -> dict[str, str]:
    """The context every Prime Traces upload of a run carries: this SDK, the run's type, and, when the run
    names them, its framework and model."""
    context = {"source": "prime-otel", "run_type": run_type}
    for key, value in (("framework", framework), ("model", model)):
        if value:
            context[key] = value
    return context


@dataclass(frozen=True)
class TracesLimits:
    """What Prime Traces refuses in one line (the numbers the platform contract leaves open are the ones the local
    platform enforces)."""

    line_bytes: int = MAX_LINE_BYTES
    traces_per_episode: int = 1024
    id_length: int = 256


DEFAULT_LIMITS = TracesLimits()


def _environment_id(record: Any) -> Any:
    return field_of(field_of(record, "env"), "id")


def refusal(record: Any, line_format: LineFormat, size: int, limits: TracesLimits) -> str | None:
    """The 400 code Prime Traces would answer for this line alone (``record`` is the mapping or the model object
    the line encodes, ``size`` its length in bytes without the newline), or None when it would take it."""
    if size > limits.line_bytes:
        return "trace_too_large"
    record_id = field_of(record, "id")
    if not isinstance(record_id, str) or not record_id:
        return "invalid_trace"
    if _too_long(_environment_id(record), limits):
        return "environment_id_too_long"
    members = field_of(record, "traces")
    if line_format is LineFormat.TRACE:
        return "line_format_mismatch" if isinstance(members, (list, tuple)) else None
    if not isinstance(members, (list, tuple)):
        return "line_format_mismatch"
    if len(record_id) > limits.id_length:
        return "episode_id_too_long"
    if len(members) > limits.traces_per_episode:
        return "too_many_traces_in_episode"
    seen: set[str] = set()
    for member in members:
        member_id = field_of(member, "id")
        if not isinstance(member_id, str) or not member_id:
            return "invalid_trace"
        if member_id in seen:
            return "duplicate_trace_id"
        seen.add(member_id)
        if _too_long(_environment_id(member), limits):
            return "environment_id_too_long"
    return None


def _too_long(value: Any, limits: TracesLimits) -> bool:
    return isinstance(value, str) and len(value) > limits.id_length


def _isolatable(error: BaseException) -> bool:
    """A rejection that may be caused by some of the lines only: splitting the upload tells which."""
    if isinstance(error, TraceTooLargeError):
        return True
    if isinstance(error, ValidationRejectedError):
        return error.code not in _REQUEST_CODES
    return isinstance(error, APIError) and not isinstance(error, RetryableAPIError) and error.status_code in (413, 422)


def _rejection_reason(error: BaseException) -> str:
    if isinstance(error, TraceTooLargeError):
        return "rejected before sending: trace_too_large"
    status = error.status_code if isinstance(error, APIError) else None
    code = error.code if isinstance(error, APIError) else None
    return "rejected by the platform: " + " ".join(str(part) for part in (status, code) if part is not None)


@dataclass
class _Lines:
    """The lines of one line format in a batch, with each line's position in the batch."""

    line_format: LineFormat
    positions: list[int] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)
    has_traces: list[bool] = field(default_factory=list)
    ids: list[Any] = field(default_factory=list)


class _Unsent(Exception):
    """An upload failed for a reason that is not the lines': ``indices`` (into its lines) were not stored."""

    def __init__(self, cause: BaseException, indices: list[int]) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.indices = indices


class PrimeTracesSink(RecordSink):
    """Writes episode and trace spans to Prime Traces, stamped with the platform run id and kind."""

    name = "traces"
    replay_safe = True  # content-addressed: the service answers a replay with the earlier receipt
    linger_seconds = TRACES_LINGER_SECONDS

    def __init__(
        self,
        *,
        run_id: str,
        run_kind: RunKind,
        context: Mapping[str, str],
        client_factory: TracesClientFactory,
        limits: TracesLimits | None = None,
    ) -> None:
        super().__init__()
        self.run_id = run_id
        self.run_kind = run_kind
        self.context = dict(context)
        self.limits = limits or DEFAULT_LIMITS
        self.service_not_enabled = False
        self.episodes_written = 0
        self.receipts_received = 0
        self.nullified_records = 0
        self.receipts: collections.deque[UploadReceipt] = collections.deque(maxlen=_KEPT_RECEIPTS)
        self._client_factory = client_factory
        self._client: TracesClient | None = None

    @classmethod
    def for_run(
        cls,
        *,
        run_id: str,
        run_kind: RunKind,
        context: Mapping[str, str],
        api_key: str,
        traces_url: str,
        team_id: str | None,
    ) -> PrimeTracesSink:
        def build() -> TracesClient:
            return traces_client(api_key=api_key, base_url=traces_url, team_id=team_id)

        return cls(run_id=run_id, run_kind=run_kind, context=context, client_factory=build)

    def opt_out(self) -> None:
        """The run opted out of Prime Traces: never contact the service."""
        self.service_not_enabled = True
        self.enabled = False

    @property
    def quiet_off_reason(self) -> str | None:
        return "not enabled for this account" if self.service_not_enabled else None

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        if not self.enabled or not spans:
            return
        groups = self._lines(spans)
        for index, group in enumerate(groups):
            try:
                self._upload(group, 0, len(group.lines))
            except _Unsent as unsent:
                error = unsent.cause
                if isinstance(error, ForbiddenError):
                    if error.code == SERVICE_NOT_ENABLED and self.receipts_received == 0:
                        self.service_not_enabled = True
                        self.enabled = False
                        _logger.info(
                            "Prime Traces is not enabled for this account; the run continues on the sample tables"
                        )
                        return
                    self.enabled = False
                lost = [group.positions[i] for i in unsent.indices]
                lost += [position for later in groups[index + 1 :] for position in later.positions]
                raise SinkWriteError(error, len(lost), lost=lost) from error

    def _lines(self, spans: Sequence[ReadableSpan]) -> list[_Lines]:
        """The batch's stamped lines by line format (in order of first appearance); a line Prime Traces would refuse
        for what it is stays out, counted as rejected."""
        groups: dict[LineFormat, _Lines] = {}
        for position, span in enumerate(spans):
            if not isinstance(span, RecordSpan):
                self._reject(1, f"not a record span: {span.name!r}")
                continue
            line_format = LineFormat.EPISODE if span.name == EPISODE_SPAN else LineFormat.TRACE
            try:
                encoded = span.encoded()
            except Exception as error:  # the records processor leaves these out; other feeders may not
                self._reject(1, why_unencodable(error), field_of(span.record, "id"))
                continue
            line = encoded.stamped(self.run_id, self.run_kind) + b"\n"
            shape = span.record if isinstance(span.record, (Mapping, BaseModel)) else encoded.record
            code = refusal(shape, line_format, len(line) - 1, self.limits)
            if code is not None:
                self._reject(1, f"rejected before sending: {code}", field_of(shape, "id"))
                continue
            # NaN/inf are not JSON: the uploaded copy carries null and the record is counted, not lost.
            if encoded.nullified:
                self.nullified_records += 1
            group = groups.setdefault(line_format, _Lines(line_format))
            group.positions.append(position)
            group.lines.append(line)
            group.has_traces.append(encoded.has_traces)
            group.ids.append(field_of(shape, "id"))
        return list(groups.values())

    def _upload(self, group: _Lines, start: int, stop: int) -> None:
        """Upload ``group.lines[start:stop]``. A rejection that may be some lines' splits the rest in halves until the
        rejected lines are alone (counted failed with the platform's code); any other failure raises ``_Unsent``
        with the lines that were not stored."""
        committed = start
        base = start

        def on_batch(batch: Batch, receipt: UploadReceipt) -> None:
            nonlocal committed
            first = base + batch.first_line_number - 1
            committed = first + batch.num_lines
            self.receipts_received += 1
            self.receipts.append(receipt)
            if group.line_format is LineFormat.EPISODE:
                self.episodes_written += sum(group.has_traces[first:committed])
            self._count(delivered=batch.num_lines)

        try:
            for attempt in range(UPLOAD_ATTEMPTS):
                # Each attempt resumes at the first line not stored: its batches are the same bytes as before (the
                # same idempotency keys), so a batch an ambiguous failure stored is answered with its receipt.
                base = committed
                try:
                    with suppressed_instrumentation(), metered_requests(self._count_request):
                        self._traces_client().upload_lines(
                            group.lines[base:stop],
                            line_format=group.line_format,
                            context=self.context,
                            compress=True,
                            max_attempts=1,
                            on_batch=on_batch,
                        )
                    break
                except (RetryableAPIError, TransportError) as error:
                    if attempt == UPLOAD_ATTEMPTS - 1 or not _wait_to_retry(error, attempt):
                        raise
        except Exception as error:
            if not _isolatable(error):
                raise _Unsent(error, list(range(committed, stop))) from error
            if stop - committed <= 1:
                if committed < stop:
                    self._reject(1, _rejection_reason(error), group.ids[committed])
                return
            middle = (committed + stop) // 2
            try:
                self._upload(group, committed, middle)
            except _Unsent as unsent:
                raise _Unsent(unsent.cause, [*unsent.indices, *range(middle, stop)]) from unsent.cause
            self._upload(group, middle, stop)

    def _traces_client(self) -> TracesClient:
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.client.close()

    def reset_after_fork(self) -> None:
        super().reset_after_fork()
        self._client = None
