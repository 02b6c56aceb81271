"""A received training run's Parquet step objects, kept exactly once across a gateway restart.

Each presign mints a new key and objects are additive per step, so a step object whose confirm was applied just
before the gateway died, replayed after its restart, would show the step's rows twice. With durable state
(``intents``) the object's key is written before its confirm leaves (with the sample id range it used); a record
replayed after a restart whose confirm was in flight has that key confirmed again (confirming a key twice
registers it once) and no new object is uploaded for it. Records delivered or failed before the restart are
counted, not sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .._attempts import REQUEST_PROGRESS
from .._sink import SinkWriteError
from ..client import ObjectStorage, PlatformHTTP, TrainingRunsAPI
from ..exporters.rft_samples import RftSampleRowsSink
from ._intents import RequestIntents, SinkIntents
from ._spans import GatewayRecordSpan
from ._state import DELIVERED, FAILED, RELEASED, SENDING, Intent

_RANGE = "range:"
#: Why a record counts failed when its step object's confirm, in flight at a restart, cannot be confirmed again.
POSSIBLY_REGISTERED = "possibly registered before a gateway restart (not sent again)"


class _ConfirmAfter(TrainingRunsAPI):
    """The training API whose ``confirm`` first tells ``before_confirm`` (step, key)."""

    def __init__(self, http: PlatformHTTP) -> None:
        super().__init__(http)
        self.before_confirm: Callable[[int, str], None] | None = None

    def confirm(self, run_id: str, step: int, key: str) -> None:
        if self.before_confirm is not None:
            self.before_confirm(step, key)
        super().confirm(run_id, step, key)


class _StepIntents(RequestIntents):
    """A write's records of one step object go in flight, with the object's key, just before its confirm."""

    def __init__(self, intents: SinkIntents, seqs: Mapping[int, int], ranges: Mapping[int, int]) -> None:
        super().__init__(intents, seqs, lambda _: dict(self._object), self._range_counter)
        self._object: dict[str, Any] = {}
        self._ranges = ranges
        self._carried: list[int] = []

    def carrying(self, positions: Iterable[int]) -> None:
        self._carried = list(positions)  # written once the key is known (``confirming``)

    def confirming(self, step: int, key: str) -> None:
        self._object = {"step": step, "key": key}
        super().carrying(self._carried)

    def _range_counter(self, _: Iterable[int]) -> Mapping[str, int]:
        step = int(self._object["step"])
        return {f"{_RANGE}{step}": self._ranges.get(step, 0) + 1}


class StepObjectsSink(RftSampleRowsSink):
    """``RftSampleRowsSink`` whose objects are each stored once across a gateway restart (see the module)."""

    def __init__(
        self,
        http: PlatformHTTP,
        storage: ObjectStorage,
        run_id: str,
        *,
        step_interval: int,
        write_only_when: Callable[[], bool] | None = None,
        intents: SinkIntents | None = None,
    ) -> None:
        self._confirms = _ConfirmAfter(http)
        super().__init__(self._confirms, storage, run_id, step_interval=step_interval, write_only_when=write_only_when)
        self._intents = intents
        #: The sample id range each step's latest object uses.
        self._range_used: dict[int, int] = {}

    @property
    def intents(self) -> SinkIntents | None:
        return self._intents

    def restore(self) -> None:
        """After a restart: each step's sample id ranges continue past those of objects that may be registered."""
        if self._intents is not None:
            for key, value in self._intents.counters.items():
                if key.startswith(_RANGE):
                    step = int(key[len(_RANGE) :])
                    self._ranges[step] = max(self._ranges[step], value)

    def _next_range(self, step: int) -> int:
        index = super()._next_range(step)
        self._range_used[step] = index
        return index

    def write(self, items: Sequence[Any]) -> None:
        if self._intents is None or not self.enabled or not items:
            super().write(items)
            return
        if self._write_only_when is not None and not self._write_only_when():
            return
        settled = self._settle_replayed(items)
        fresh = [position for position in range(len(items)) if position not in settled]
        if not fresh:
            return
        seqs = {at: seq for at, position in enumerate(fresh) if (seq := _seq(items[position])) is not None}
        progress = _StepIntents(self._intents, seqs, self._range_used)
        self._confirms.before_confirm = progress.confirming
        token = REQUEST_PROGRESS.set(progress)
        try:
            super().write([items[position] for position in fresh])
        except SinkWriteError as error:
            raise _in_batch(error, fresh) from error.cause
        finally:
            REQUEST_PROGRESS.reset(token)
            self._confirms.before_confirm = None

    def _settle_replayed(self, items: Sequence[Any]) -> set[int]:
        """Positions this sink settled before a restart: counted, not sent. A step object whose confirm was in
        flight is confirmed again (once per key); refused, it was not registered and its records are sent anew."""
        assert self._intents is not None
        found: dict[int, tuple[int, Intent]] = {}
        for position, item in enumerate(items):
            seq = _seq(item)
            intent = self._intents.get(seq)
            if seq is not None and intent is not None and intent.state != RELEASED:
                found[position] = (seq, intent)
        objects: dict[tuple[int, str], list[int]] = {}
        for seq, intent in found.values():
            if intent.state == SENDING:
                objects.setdefault((int(intent.detail["step"]), str(intent.detail["key"])), []).append(seq)
        outcomes: dict[int, Intent] = {}
        for (step, key), members in objects.items():
            outcome = self._confirm_again(step, key)
            outcomes.update({seq: outcome for seq in members})
        self._intents.record(outcomes)
        settled: set[int] = set()
        for position, (seq, intent) in found.items():
            outcome = outcomes.get(seq, intent)
            if outcome.state == DELIVERED:
                self._count(delivered=1)
            elif outcome.state == FAILED:
                if self.on_rejected is not None:
                    self.on_rejected(1, str(outcome.detail.get("reason") or POSSIBLY_REGISTERED))
            else:
                continue
            settled.add(position)
        return settled

    def _confirm_again(self, step: int, key: str) -> Intent:
        detail = {"step": step, "key": key}
        outcome = self.confirm_again(step, key)
        if outcome.registered:
            return Intent(DELIVERED, detail, time.time())
        if outcome.registered is False:
            return Intent(RELEASED, detail, time.time())
        return Intent(FAILED, {**detail, "reason": POSSIBLY_REGISTERED}, time.time())


def _seq(item: Any) -> int | None:
    return item.seq if isinstance(item, GatewayRecordSpan) else None


def _in_batch(error: SinkWriteError, positions: list[int]) -> SinkWriteError:
    """``error`` of a write of ``items[p] for p in positions``, with its positions in the whole batch."""
    lost = [positions[i] for i in error.lost_positions(len(positions))]
    ambiguous = [positions[i] for i in error.ambiguous_positions]
    failed = {positions[i]: reason for i, reason in error.failed_positions.items()}
    return SinkWriteError(error.cause, error.failed_records, lost=lost, ambiguous=ambiguous, failed=failed)
