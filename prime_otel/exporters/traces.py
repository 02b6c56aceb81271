"""Prime Traces, the system of record: stamped JSONL through the ``prime-traces`` client.

Uploads are content-addressed (the idempotency key is the digest of the exact bytes), so every retry,
ambiguous or not, is safe: the service replays the earlier receipt instead of storing twice.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Mapping, Sequence

from opentelemetry.sdk.trace import ReadableSpan
from prime_traces import Batch, LineFormat, TracesClient, UploadReceipt

from ..client import suppressed_instrumentation, traces_client
from ..errors import ForbiddenError
from ..processors._spans import EPISODE_SPAN, RecordSpan
from ._base import RecordExporter, SinkWriteError

_logger = logging.getLogger(__name__)

SERVICE_NOT_ENABLED = "service_not_enabled"
_KEPT_RECEIPTS = 100

TracesClientFactory = Callable[[], TracesClient]


class PrimeTracesExporter(RecordExporter):
    """Writes episode and trace spans to Prime Traces, stamped with the platform run id and kind."""

    name = "traces"
    replay_safe = True  # content-addressed: the service answers a replay with the earlier receipt

    def __init__(
        self,
        *,
        run_id: str,
        run_kind: str,
        context: Mapping[str, str],
        client_factory: TracesClientFactory,
    ) -> None:
        super().__init__()
        self.run_id = run_id
        self.run_kind = run_kind
        self.context = dict(context)
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
        run_kind: str,
        context: Mapping[str, str],
        api_key: str,
        traces_url: str,
        team_id: str | None,
    ) -> PrimeTracesExporter:
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
        lines, kinds = self._encode(spans)
        line_format = LineFormat.EPISODE if spans[0].name == EPISODE_SPAN else LineFormat.TRACE
        committed = 0

        def on_batch(batch: Batch, receipt: UploadReceipt) -> None:
            nonlocal committed
            start = batch.first_line_number - 1
            committed += batch.num_lines
            self.receipts_received += 1
            self.receipts.append(receipt)
            if line_format is LineFormat.EPISODE:
                self.episodes_written += sum(kinds[start : start + batch.num_lines])
            self._count(delivered=batch.num_lines, requests=1, sent_bytes=batch.size)

        try:
            with suppressed_instrumentation():
                self._traces_client().upload_lines(
                    lines, line_format=line_format, context=self.context, compress=True, on_batch=on_batch
                )
        except ForbiddenError as exc:
            if exc.code == SERVICE_NOT_ENABLED and self.receipts_received == 0:
                self.service_not_enabled = True
                self.enabled = False
                _logger.info("Prime Traces is not enabled for this account; the run continues on the sample tables")
                return
            self.enabled = False
            raise
        except Exception as exc:
            if committed:
                lost = range(committed, len(lines))
                raise SinkWriteError(exc, len(lost), lost=lost) from exc
            raise

    def _encode(self, spans: Sequence[ReadableSpan]) -> tuple[list[bytes], list[bool]]:
        lines: list[bytes] = []
        has_traces: list[bool] = []
        for span in spans:
            if not isinstance(span, RecordSpan):
                raise TypeError(f"the traces sink needs record spans, got a {span.name!r} span without a record")
            encoded = span.encoded()
            # NaN/inf are not JSON: the uploaded copy carries null and the record is counted, not lost.
            if encoded.nullified:
                self.nullified_records += 1
            lines.append(encoded.stamped(self.run_id, self.run_kind) + b"\n")
            has_traces.append(encoded.has_traces)
        return lines, has_traces

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
