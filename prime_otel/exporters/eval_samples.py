"""The legacy v0 eval sample table: ``POST /evaluations/{id}/samples``.

The table is append-only, so a request that failed ambiguously is never replayed (the client does not
retry non-idempotent POSTs after 502/504 or a broken stream): a lost batch is visible in the counts, a
duplicate would silently skew every dashboard average.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from .._records import compact_json, is_episode, nullify
from ..client import EvaluationsAPI, is_ambiguous
from ..errors import is_permanent, is_transient
from ..processors._spans import RecordSpan, record_of
from ..projection import EncodedSample, RecordInput, encode_samples, pack_sample_requests
from ._base import RecordExporter, SinkWriteError

_logger = logging.getLogger(__name__)


class EvalSamplesExporter(RecordExporter):
    """Projects episode spans to v0 rows (rollouts numbered per example across the run) and appends them."""

    name = "eval_samples"

    def __init__(
        self, api: EvaluationsAPI, evaluation_id: str, *, write_only_when: Callable[[], bool] | None = None
    ) -> None:
        super().__init__()
        self._api = api
        self._evaluation_id = evaluation_id
        self._write_only_when = write_only_when
        self._rollout_numbers: dict[Any, int] = {}
        self._warned_skip = False

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        if not self.enabled or not spans:
            return
        if self._write_only_when is not None and not self._write_only_when():
            return
        samples = self._project(spans)
        if samples:
            self._send(samples)

    def _project(self, spans: Sequence[ReadableSpan]) -> list[EncodedSample]:
        """v0 rows with their JSON, each tagged with the position of its span in this batch."""
        ready: list[EncodedSample] = []
        episodes: list[Any] = []
        records: list[RecordInput | None] = []
        positions: list[int] = []
        skipped = 0
        for position, span in enumerate(spans):
            record = record_of(span)
            if isinstance(record, Mapping) and "sample_id" in record:
                row = nullify(dict(record))
                ready.append(EncodedSample(row=row, data=compact_json(row), source=position))
            elif record is not None and is_episode(record):
                episodes.append(record)
                records.append(span.encoded() if isinstance(span, RecordSpan) else None)
                positions.append(position)
            else:
                skipped += 1
        projected = encode_samples(episodes, self._rollout_numbers, records=records)
        for sample in projected:
            sample.source = positions[sample.source]
        ready.extend(projected)
        if skipped:
            self._count(skipped=skipped)
            if not self._warned_skip:
                self._warned_skip = True
                _logger.warning(
                    "the eval sample table takes episodes and v0 rows only; %d bare traces went to Prime Traces only",
                    skipped,
                )
        return ready

    def _send(self, samples: list[EncodedSample]) -> None:
        """Loss is counted per input record, once, with the first request that carries one of its rows."""
        counted: set[int] = set()
        lost: list[int] = []
        ambiguous: list[int] = []
        reported: BaseException | None = None
        requests = pack_sample_requests(samples)
        for position, request in enumerate(requests):
            records = sorted({samples[i].source for i in request.indices} - counted)
            counted.update(records)
            try:
                self._api.append_samples(self._evaluation_id, request.body)
            except Exception as exc:
                (ambiguous if is_ambiguous(exc) else lost).extend(records)
                if not is_permanent(exc):
                    if reported is None or is_transient(exc):
                        reported = exc
                    continue
                remaining = {samples[i].source for later in requests[position + 1 :] for i in later.indices}
                lost.extend(sorted(remaining - counted))
                raise SinkWriteError(exc, len(lost) + len(ambiguous), lost=lost, ambiguous=ambiguous) from exc
            self._count(delivered=len(records), requests=1, sent_bytes=len(request.body))
        if reported is not None:
            raise SinkWriteError(reported, len(lost) + len(ambiguous), lost=lost, ambiguous=ambiguous)
