"""The legacy v0 eval sample table: ``POST /evaluations/{id}/samples``.

The table is append-only, so a request that failed ambiguously (502/504, a broken stream) is never sent again
blindly: a duplicate would silently skew every dashboard average. Its rows are read back instead; the request
is sent again only when two reads prove that none of it was stored, and what a read cannot decide is reported
as possibly missing. A 4xx rejection of several rows proves nothing was stored: the request is split until only
the rows refused are left, and those alone fail, counted with the platform's reason.

The table takes 300 requests a minute per token. Its lane lingers ``SAMPLES_LINGER_SECONDS`` after a record
arrives and packs what came meanwhile into as few requests as the 25 MiB body cap allows, so a producer logging
one episode per call costs about one request a second at any rate; a pacer keeps the sink under the limit even so.
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from .._attempts import ATTEMPT_LISTENER, REQUEST_PROGRESS, ROW_NUMBERING, NumberedRows, RequestProgress
from .._sink import SinkWriteError
from ..client import EvaluationsAPI, RequestPacer, StoredSamples, metered_requests, platform_limit, sample_key
from ..client._readback import SETTLE_SECONDS, SampleKey
from ..errors import failure_reason, is_ambiguous, is_permanent, is_record_rejection, is_transient
from ..records import RecordSpan, compact_json, is_episode, nullify, record_of
from ._base import RecordSink
from ._sample_rows import (
    EncodedSample,
    RecordInput,
    encode_episode_samples,
    pack_sample_requests,
    rollout_counter_key,
)

_logger = logging.getLogger(__name__)

#: Sends of one request at most: the first, and one after a read-back proved it was not stored (rows still not
#: stored after that are kept for a later replay, like any other failure that stored nothing).
SEND_ATTEMPTS = 2
#: How long the sink's lane waits for more records before it writes (a record's added latency, at most).
SAMPLES_LINGER_SECONDS = 1.0
#: Most estimated JSON bytes one write packs (its requests stay within the 25 MiB body cap): large episodes at a high
#: rate still cost about one request per linger.
SAMPLES_WRITE_BYTES = 16 * 1024 * 1024
#: The platform's limit on sample appends per token and minute (``PRIME_SAMPLES_RATE_LIMIT`` for another one); the
#: sink paces itself to it.
SAMPLES_REQUESTS_PER_MINUTE = 300
SAMPLES_RATE_LIMIT_VARIABLE = "PRIME_SAMPLES_RATE_LIMIT"
#: Refusals of what a request carries (malformed, too large, invalid): splitting it finds the rows refused.
_SPLIT_ON = frozenset({400, 413, 422})
_BODY_OPEN, _BODY_CLOSE = b'{"samples":[', b"]}"


class _RowOutcomes:
    """What became of each row of one write: delivered, not applied (kept), possibly applied, or failed.

    With a ``progress`` listener it is told, request by request, which input records (positions in the batch)
    a request carries, which records have every row stored, and which have none stored nor possibly stored.
    """

    def __init__(self, samples: Sequence[EncodedSample], progress: RequestProgress | None = None) -> None:
        self.delivered: set[int] = set()
        self.lost: dict[int, BaseException] = {}
        self.maybe: dict[int, BaseException] = {}
        self.failed: dict[int, str] = {}
        self.errors: list[BaseException] = []
        self._samples = samples
        self._progress = progress
        self._rows_of: dict[int, list[int]] = defaultdict(list)
        for index, sample in enumerate(samples):
            self._rows_of[sample.source].append(index)

    def sending(self, indices: Sequence[int]) -> None:
        if self._progress is not None:
            self._progress.carrying(self._records(indices))

    def deliver(self, indices: Sequence[int] | set[int]) -> None:
        self.delivered.update(indices)
        if self._progress is not None:
            stored = [r for r in self._records(indices) if all(i in self.delivered for i in self._rows_of[r])]
            if stored:
                self._progress.delivered(stored)

    def lose(self, indices: Sequence[int], error: BaseException) -> None:
        self.lost.update(dict.fromkeys(indices, error))
        self.errors.append(error)
        self._release(indices)

    def possibly_applied(self, indices: Sequence[int] | set[int], error: BaseException) -> None:
        self.maybe.update(dict.fromkeys(indices, error))
        self.errors.append(error)

    def fail(self, indices: Sequence[int], error: BaseException) -> None:
        self.failed.update(dict.fromkeys(indices, failure_reason(error)))
        self.errors.append(error)
        self._release(indices)

    def _release(self, indices: Sequence[int]) -> None:
        """Records with no row stored nor possibly stored are off the in-flight marker."""
        if self._progress is None:
            return
        untouched = [
            r
            for r in self._records(indices)
            if not any(i in self.delivered or i in self.maybe for i in self._rows_of[r])
        ]
        if untouched:
            self._progress.released(untouched)

    def _records(self, indices: Iterable[int]) -> list[int]:
        return sorted({self._samples[i].source for i in indices})


class EvalSamplesSink(RecordSink):
    """Projects episode spans to v0 rows (rollouts numbered per example across the run) and appends them."""

    name = "eval_samples"
    #: A batch goes out in several POSTs: each names its records through ``REQUEST_PROGRESS``.
    reports_requests = True
    linger_seconds = SAMPLES_LINGER_SECONDS
    max_write_bytes = SAMPLES_WRITE_BYTES

    def __init__(
        self,
        api: EvaluationsAPI,
        evaluation_id: str,
        *,
        write_only_when: Callable[[], bool] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__()
        self._api = api
        self._evaluation_id = evaluation_id
        self._write_only_when = write_only_when
        self._sleep = sleep
        self.pacer = RequestPacer(platform_limit(SAMPLES_RATE_LIMIT_VARIABLE, SAMPLES_REQUESTS_PER_MINUTE))
        self._rollout_numbers: dict[Any, int] = {}
        self._warned_skip = False
        #: Why the last :meth:`read_back` could not read the table (None: it read it).
        self.last_read_error: BaseException | None = None

    def write(self, spans: Sequence[ReadableSpan]) -> None:
        if not self.enabled or not spans:
            return
        if self._write_only_when is not None and not self._write_only_when():
            return
        samples = self._project(spans)
        if samples:
            with metered_requests(self._count_request):
                self._send(samples)

    def reset_after_fork(self) -> None:
        super().reset_after_fork()
        self.pacer.reset_after_fork()

    def write_samples(self, samples: list[EncodedSample]) -> None:
        """Rows projected and encoded elsewhere (a gateway's), each ``source`` the position of its record in the
        caller's batch, which the failure indices of ``SinkWriteError`` then refer to."""
        if self.enabled and samples and (self._write_only_when is None or self._write_only_when()):
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
        numbering = ROW_NUMBERING.get()
        for episode, record, position in zip(episodes, records, positions, strict=True):
            given = numbering.given(position) if numbering is not None else None
            numbers = self._rollout_numbers if given is None else given
            ready.extend(encode_episode_samples(episode, numbers, record=record, source=position))
        if numbering is not None:
            numbering.numbered(self._numbered_rows(ready, dict(zip(positions, episodes, strict=True))))
        if skipped:
            self._count(skipped=skipped)
            if not self._warned_skip:
                self._warned_skip = True
                _logger.warning(
                    "the eval sample table takes episodes and v0 rows only; %d bare traces went to Prime Traces only",
                    skipped,
                )
        return ready

    def _numbered_rows(self, samples: list[EncodedSample], episodes: Mapping[int, Any]) -> dict[int, NumberedRows]:
        """Per record (position): its rows' keys, and for an episode the counter and number its rollout took (a
        counter raised to a number given back, so the numbers that follow never repeat it)."""
        keys: dict[int, list[SampleKey | None]] = defaultdict(list)
        numbers: dict[int, int] = {}
        for sample in samples:
            identity = sample.identity
            keys[sample.source].append(sample_key(identity))
            numbers.setdefault(sample.source, identity["rollout_number"])
        numbered: dict[int, NumberedRows] = {}
        for position, row_keys in keys.items():
            episode = episodes.get(position)
            if episode is None:
                numbered[position] = NumberedRows(None, None, row_keys)
                continue
            counter = rollout_counter_key(episode)
            number = numbers[position]
            self._rollout_numbers[counter] = max(self._rollout_numbers.get(counter, 0), number)
            numbered[position] = NumberedRows(_counter_text(counter), number, row_keys)
        return numbered

    def continue_numbering(self, counters: Mapping[str, int]) -> None:
        """Number each example's rollouts after ``counters`` (counter key as JSON text -> its last number), as the
        ledger of a run this sink takes over kept them."""
        for text, number in counters.items():
            counter = json.loads(text)
            self._rollout_numbers[counter] = max(self._rollout_numbers.get(counter, 0), int(number))

    def _send(self, samples: list[EncodedSample]) -> None:
        rows = _RowOutcomes(samples, REQUEST_PROGRESS.get())
        stop: BaseException | None = None
        for request in pack_sample_requests(samples):
            if stop is None:
                stop = self._deliver(samples, list(request.indices), rows)
            else:
                rows.lose(list(request.indices), stop)
        self._settle(samples, rows, stop)

    def _deliver(self, samples: list[EncodedSample], indices: list[int], rows: _RowOutcomes) -> BaseException | None:
        """Send rows ``indices`` as one request; the permanent error that ends the batch, if one came."""
        error: BaseException | None = None
        for _ in range(SEND_ATTEMPTS):
            body = b"".join((_BODY_OPEN, b",".join(samples[i].data for i in indices), _BODY_CLOSE))
            rows.sending(indices)
            try:
                self.pacer.acquire()
                self._api.append_samples(self._evaluation_id, body)
            except Exception as exc:
                error = exc
            else:
                rows.deliver(indices)
                return None
            if is_record_rejection(error):
                if getattr(error, "status_code", None) in _SPLIT_ON and len(indices) > 1:
                    return self._bisect(samples, indices, rows)
                rows.fail(indices, error)
                return None
            if not is_ambiguous(error):
                rows.lose(indices, error)
                return error if is_permanent(error) else None
            stored, absent = self._read_back(samples, indices)
            rows.deliver(stored)
            if not absent:
                undecided = [i for i in indices if i not in stored]
                if undecided:
                    rows.possibly_applied(undecided, error)
                return None
            _logger.info("%d sample rows were not stored after %s; sending them again", len(indices), error)
        assert error is not None
        rows.lose(indices, error)  # proven not stored after the last send: safe to keep for a replay
        return None

    def _bisect(self, samples: list[EncodedSample], indices: list[int], rows: _RowOutcomes) -> BaseException | None:
        half = len(indices) // 2
        stop = self._deliver(samples, indices[:half], rows)
        if stop is not None:
            rows.lose(indices[half:], stop)
            return stop
        return self._deliver(samples, indices[half:], rows)

    def _read_back(self, samples: list[EncodedSample], indices: list[int]) -> tuple[set[int], set[int]]:
        """``(stored, absent)`` among ``indices``; ``absent`` (all of them) only when two reads a settle apart
        found none. Rows in neither stay undecided."""
        verdicts = self.read_back([sample_key(samples[i].row) for i in indices])
        stored = {index for index, verdict in zip(indices, verdicts, strict=True) if verdict is True}
        absent = set(indices) if all(verdict is False for verdict in verdicts) else set()
        return stored, absent

    def read_back(self, keys: Sequence[SampleKey | None]) -> list[bool | None]:
        """Per row key (``sample_id``, ``rollout_number``): True when stored, False when two reads a settle apart
        found it absent (every key absent on the first read), None when no read can tell (or the read failed)."""
        # The reads store nothing: the failed append's in-flight marker (a crash now means possibly missing) stays.
        listener = ATTEMPT_LISTENER.set(None)
        self.last_read_error = None
        try:
            verdicts = StoredSamples.read(self._api, self._evaluation_id).stored(keys)
            if all(verdict is False for verdict in verdicts):
                self._sleep(SETTLE_SECONDS)
                verdicts = StoredSamples.read(self._api, self._evaluation_id).stored(keys)
        except Exception as exc:
            _logger.warning("could not read back %d sample rows: %s", len(keys), exc)
            self.last_read_error = exc
            return [None] * len(keys)
        finally:
            ATTEMPT_LISTENER.reset(listener)
        return verdicts

    def _settle(self, samples: list[EncodedSample], rows: _RowOutcomes, stop: BaseException | None) -> None:
        """Per input record (an episode may have several rows): delivered only when every row is."""
        by_record: dict[int, list[int]] = defaultdict(list)
        for index, sample in enumerate(samples):
            by_record[sample.source].append(index)
        delivered = 0
        lost: list[int] = []
        ambiguous: list[int] = []
        failed: dict[int, str] = {}
        for record, indices in sorted(by_record.items()):
            refused = [rows.failed[i] for i in indices if i in rows.failed]
            if refused:
                failed[record] = refused[0]
            elif any(i in rows.maybe for i in indices):
                ambiguous.append(record)
            elif any(i in rows.lost for i in indices):
                if any(i in rows.delivered for i in indices):
                    # Sending the record again would store its delivered rows twice.
                    failed[record] = (
                        f"partly stored: {failure_reason(next(rows.lost[i] for i in indices if i in rows.lost))}"
                    )
                else:
                    lost.append(record)
            else:
                delivered += 1
        self._count(delivered=delivered)
        if lost or ambiguous or failed:
            cause = stop or next((e for e in rows.errors if is_transient(e)), rows.errors[-1])
            raise SinkWriteError(
                cause, len(lost) + len(ambiguous) + len(failed), lost=lost, ambiguous=ambiguous, failed=failed
            )


def _counter_text(counter: Any) -> str | None:
    """A counter's key as JSON text, for the spool's ledger; None for one JSON cannot hold (it is not kept)."""
    try:
        return json.dumps(counter)
    except (TypeError, ValueError):
        return None
