"""Training samples: one Parquet object per dispatch step (presign → object PUT → confirm).

Objects are additive per step, so every upload of a step numbers its ``sample_id``s in its own 2**32 range
(counted per attempt: a lost confirm may still have landed); a forked child draws its ranges from
[2**20, 2**21), a band the parent's counters never reach, so ``(step, sample_id)`` stays unique and below
2**53 (the viewer parses sample ids as JSON numbers).
"""

from __future__ import annotations

import logging
import random
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry.sdk.trace import ReadableSpan

from .._attempts import REQUEST_PROGRESS, ROW_NUMBERING, NumberedRows, RequestProgress
from .._sink import SinkWriteError
from ..client import ObjectStorage, TrainingRunsAPI
from ..errors import failure_reason, is_ambiguous, is_permanent, is_record_rejection
from ..records import impossible_training_step, is_episode, record_of, training_step
from ._base import RecordSink
from ._parquet_rows import episodes_to_parquet_bytes, parquet_available, sample_rows_to_parquet_bytes

_logger = logging.getLogger(__name__)

SAMPLE_ID_RANGE = 2**32
_CHILD_RANGES = (2**20, 2**21)
DEFAULT_STEP_INTERVAL = 10
#: Why a training episode whose dispatch step is no step (``records.step_number``) is counted failed.
IMPOSSIBLE_STEP = "training step outside 0 .. 2**53 - 1"
#: The counter, in a ledger's ``counters``, of a step's sample id ranges (its number: the last range used).
RANGE_COUNTER = "range:"


@dataclass(frozen=True)
class ConfirmedAgain:
    """What confirming again the key of a step object whose confirm may have been applied proved: ``registered``
    True (the object counts, once: confirming a key twice registers it once), False (the platform refused the key,
    so the object was never registered: its records are sent anew, as a fresh object) or None (nothing is proven;
    ``error`` says why, and the records are possibly missing, never sent again)."""

    registered: bool | None
    error: BaseException | None = None


def confirm_again(api: TrainingRunsAPI, run_id: str, step: int, key: str) -> ConfirmedAgain:
    """The one rule for a step object whose confirm was in flight when its sender died (see :class:`ConfirmedAgain`).
    A key whose upload never completed is refused too: an unfinished PUT stores nothing a confirm could register."""
    try:
        api.confirm(run_id, step, key)
    except Exception as exc:
        if is_record_rejection(exc):
            _logger.info("step %d's object %s was never registered; its records are sent anew", step, key)
            return ConfirmedAgain(False, exc)
        _logger.warning("step %d's object %s cannot be confirmed again: %s", step, key, failure_reason(exc))
        return ConfirmedAgain(None, exc)
    return ConfirmedAgain(True)


class RftSamplesSink(RecordSink):
    """Groups training episodes by the step they were dispatched at and uploads every ``step_interval``-th step."""

    name = "rft_samples"
    #: Each step's confirm is one request: it names its records through ``REQUEST_PROGRESS``.
    reports_requests = True

    def __init__(
        self,
        api: TrainingRunsAPI,
        storage: ObjectStorage,
        run_id: str,
        *,
        step_interval: int = DEFAULT_STEP_INTERVAL,
        write_only_when: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__()
        if step_interval < 1:
            raise ValueError(f"step_interval must be at least 1, got {step_interval}")
        self._api = api
        self._storage = storage
        self._run_id = run_id
        self._step_interval = step_interval
        self._write_only_when = write_only_when
        self._ranges: dict[int, int] = defaultdict(int)
        self._forked = False
        self.sampled_out = 0
        self.steps_written = 0
        self._unavailable = not parquet_available()
        if self._unavailable:
            self.enabled = False
            _logger.warning(
                "pyarrow is not installed, so training samples are not uploaded as Parquet "
                "(install prime-otel[train]); episodes still reach Prime Traces"
            )

    @property
    def quiet_off_reason(self) -> str | None:
        return "pyarrow is not installed" if self._unavailable else None

    def write(self, items: Sequence[Any]) -> None:
        if not self.enabled or not items:
            return
        if self._write_only_when is not None and not self._write_only_when():
            return
        by_step: dict[int, list[Any]] = defaultdict(list)
        positions: dict[int, list[int]] = defaultdict(list)
        skipped = 0
        impossible: dict[int, str] = {}
        for position, item in enumerate(items):
            step = self._step_of(item)
            if step is None:
                record = _record(item)
                if is_episode(record) and impossible_training_step(record):
                    impossible[position] = IMPOSSIBLE_STEP
                else:
                    skipped += 1
            elif step % self._step_interval:
                self.sampled_out += 1
            else:
                by_step[step].append(item)
                positions[step].append(position)
        if skipped:
            self._count(skipped=skipped)
        self._upload_steps(by_step, positions, impossible)

    def _step_of(self, item: Any) -> int | None:
        """The dispatch step of a training episode; None for what this sink does not take (eval work, bare
        traces, records without a training step)."""
        record = _record(item)
        return training_step(record) if is_episode(record) else None

    def _parquet(self, items: list[Any], step: int, sample_id_offset: int) -> bytes | None:
        episodes = [_record(item) for item in items]
        return episodes_to_parquet_bytes(episodes, self._run_id, step, sample_id_offset=sample_id_offset)

    def _upload_steps(
        self, by_step: Mapping[int, list[Any]], positions: Mapping[int, list[int]], refused: Mapping[int, str]
    ) -> None:
        """One loss unit per step. Until its confirm the step's object is invisible, so a failure before it
        stored nothing (kept for a replay); a step whose confirm failed ambiguously may be registered (never
        resent); a step the platform refused fails for good, as do the ``refused`` positions (with why)."""
        lost: list[int] = []
        ambiguous: list[int] = []
        failed: dict[int, str] = dict(refused)
        reported: BaseException | None = ValueError(next(iter(refused.values()))) if refused else None
        steps = sorted(by_step)
        progress = REQUEST_PROGRESS.get()
        for index, step in enumerate(steps):
            try:
                self._upload_step(step, by_step[step], positions[step], progress)
                continue
            except _ConfirmFailed as failure:
                ambiguous.extend(positions[step])  # stays in flight: it may be registered
                error = failure.cause
            except Exception as exc:
                error = exc
                if progress is not None:
                    progress.released(positions[step])  # refused or never confirmed: the object is invisible
                if is_record_rejection(exc):
                    failed.update(dict.fromkeys(positions[step], failure_reason(exc)))
                else:
                    lost.extend(positions[step])
            if reported is None or (is_record_rejection(reported) and not is_record_rejection(error)):
                reported = error
            if is_permanent(error):
                lost.extend(p for later in steps[index + 1 :] for p in positions[later])
                count = len(lost) + len(ambiguous) + len(failed)
                raise SinkWriteError(error, count, lost=lost, ambiguous=ambiguous, failed=failed) from error
        if reported is not None:
            count = len(lost) + len(ambiguous) + len(failed)
            raise SinkWriteError(reported, count, lost=lost, ambiguous=ambiguous, failed=failed)

    def _upload_step(
        self, step: int, episodes: list[Any], positions: list[int], progress: RequestProgress | None
    ) -> None:
        forked = self._forked
        id_range = self._next_range(step)
        payload = self._parquet(episodes, step, id_range * SAMPLE_ID_RANGE)
        if payload is None:
            self._count(skipped=len(episodes))
            return
        url, key = self._api.presign(self._run_id, step)
        self._storage.put(url, payload)
        numbering = ROW_NUMBERING.get()
        if numbering is not None:
            # Durable with the in-flight marker, before the confirm: after a crash the key is confirmed again, and
            # a fresh object of the step takes a range after this one (a forked child's ranges are drawn at random).
            counter = None if forked else f"{RANGE_COUNTER}{step}"
            made = NumberedRows(counter, None if forked else id_range, (), (step, str(key)))
            numbering.numbered(dict.fromkeys(positions, made))
        if progress is not None:
            progress.carrying(positions)  # the confirm is what makes the object count
        try:
            self._api.confirm(self._run_id, step, key)
        except Exception as exc:
            if is_ambiguous(exc):
                raise _ConfirmFailed(exc) from exc
            raise
        if progress is not None:
            progress.delivered(positions)
        self.steps_written += 1
        self._count(delivered=len(episodes), requests=3, sent_bytes=len(payload))

    def confirm_again(self, step: int, key: str) -> ConfirmedAgain:
        """Confirm again the object ``key`` of ``step``, whose confirm was in flight when its sender died."""
        outcome = confirm_again(self._api, self._run_id, step, key)
        self._count(requests=1)
        if outcome.registered:
            self.steps_written += 1
        return outcome

    def continue_ranges(self, counters: Mapping[str, int]) -> None:
        """Number each step's next objects after the sample id ranges ``counters`` says were used (a ledger's
        counters; other keys are ignored), so that no object of a run this sink takes over is duplicated."""
        for text, last in counters.items():
            if text.startswith(RANGE_COUNTER):
                step = int(text[len(RANGE_COUNTER) :])
                self._ranges[step] = max(self._ranges[step], int(last) + 1)

    def _next_range(self, step: int) -> int:
        if self._forked:
            return random.randrange(*_CHILD_RANGES)
        index = self._ranges[step]
        self._ranges[step] = index + 1
        return index

    def close(self) -> None:
        self._storage.close()

    def reset_after_fork(self) -> None:
        super().reset_after_fork()
        self._forked = True
        self._storage.reset_after_fork()


class SampleRowsItem(Protocol):
    """An item of :class:`RftSampleRowsSink`: one episode's dispatch step, v0 rows and environment id."""

    @property
    def train_step(self) -> int | None: ...

    @property
    def sample_rows(self) -> list[dict[str, Any]]: ...

    @property
    def env_name(self) -> str: ...


class RftSampleRowsSink(RftSamplesSink):
    """The same step objects built from episodes' v0 rows, for producers whose episode objects stay in their
    own process (the OTLP gateway): items are :class:`SampleRowsItem`s."""

    def _step_of(self, item: Any) -> int | None:
        step = getattr(item, "train_step", None)
        return step if isinstance(step, int) and not isinstance(step, bool) else None

    def _parquet(self, items: list[Any], step: int, sample_id_offset: int) -> bytes | None:
        rows = [row for item in items for row in item.sample_rows]
        env_names = {str(item.sample_rows[0].get("episode_id")): item.env_name for item in items if item.sample_rows}
        return sample_rows_to_parquet_bytes(
            rows, self._run_id, step, sample_id_offset=sample_id_offset, env_names=env_names
        )


class _ConfirmFailed(Exception):
    """The object was stored and its confirm failed ambiguously: it may be registered already."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _record(item: Any) -> Any:
    return record_of(item) if isinstance(item, ReadableSpan) else item
