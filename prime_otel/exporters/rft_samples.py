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
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from ..client import ObjectStorage, TrainingRunsAPI
from ..errors import is_record_rejection, is_transient
from ..processors._spans import record_of
from ..projection import episodes_to_parquet_bytes, parquet_available
from ._base import RecordExporter, SinkWriteError

_logger = logging.getLogger(__name__)

SAMPLE_ID_RANGE = 2**32
_CHILD_RANGES = (2**20, 2**21)
DEFAULT_STEP_INTERVAL = 10


def training_step(record: Any) -> int | None:
    """The dispatch step of a producer's training episode object; None for anything this sink does not take."""
    if isinstance(record, Mapping) or not hasattr(record, "traces"):
        return None
    run = getattr(record, "run", None)
    work = getattr(run, "work", None)
    step = getattr(work, "step", None)
    if getattr(run, "type", None) != "train" or getattr(work, "type", None) != "train":
        return None
    return step if isinstance(step, int) and not isinstance(step, bool) else None


class RftSamplesExporter(RecordExporter):
    """Groups training episodes by the step they were dispatched at and uploads every ``step_interval``-th step."""

    name = "rft_samples"

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
        skipped = 0
        for span in items:
            record = record_of(span) if isinstance(span, ReadableSpan) else span
            step = training_step(record)
            if step is None:
                skipped += 1
            elif step % self._step_interval:
                self.sampled_out += 1
            else:
                by_step[step].append(record)
        if skipped:
            self._count(skipped=skipped)
        self._upload_steps(by_step)

    def _upload_steps(self, by_step: Mapping[int, list[Any]]) -> None:
        lost = 0
        reported: BaseException | None = None
        for step in sorted(by_step):
            episodes = by_step[step]
            try:
                self._upload_step(step, episodes)
            except Exception as exc:
                lost += len(episodes)
                reported = exc if reported is None or not _is_permanent(reported) else reported
                if _is_permanent(exc):
                    remaining = sum(len(by_step[s]) for s in sorted(by_step) if s > step)
                    raise SinkWriteError(exc, lost + remaining) from exc
        if reported is not None:
            raise SinkWriteError(reported, lost)

    def _upload_step(self, step: int, episodes: list[Any]) -> None:
        offset = self._next_range(step) * SAMPLE_ID_RANGE
        payload = episodes_to_parquet_bytes(episodes, self._run_id, step, sample_id_offset=offset)
        if payload is None:
            self._count(skipped=len(episodes))
            return
        url, key = self._api.presign(self._run_id, step)
        self._storage.put(url, payload)
        self._api.confirm(self._run_id, step, key)
        self.steps_written += 1
        self._count(delivered=len(episodes), requests=3, sent_bytes=len(payload))

    def _next_range(self, step: int) -> int:
        if self._forked:
            return random.randrange(*_CHILD_RANGES)
        index = self._ranges[step]
        self._ranges[step] = index + 1
        return index

    def close(self) -> None:
        self._storage.close()

    def reset_after_fork(self) -> None:
        self._forked = True
        self._storage.reset_after_fork()


def _is_permanent(error: BaseException) -> bool:
    return not (is_record_rejection(error) or is_transient(error))
