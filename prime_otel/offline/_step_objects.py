"""The Parquet sample objects of an offline training run: one per sampled step, as the live run uploads them.

A live run sends one object per ``samples_step_interval``-th dispatch step (presign, object PUT, confirm); only
the confirm makes an object count. A sync builds each sampled step's object from every episode of that step in
``episodes.jsonl`` and records the object's key in its ledger before the confirm. Confirming one key twice
registers it once, so a sync interrupted anywhere resumes by confirming the recorded key again, never by
uploading a second object for the step (``rft_samples.confirm_again``: a key the platform refuses was never
registered, and the step is uploaded afresh).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..client import ObjectStorage, TrainingRunsAPI
from ..errors import failure_reason, is_record_rejection
from ..exporters._parquet_rows import episodes_to_parquet_bytes, parquet_available
from ..exporters.rft_samples import confirm_again, training_step

_logger = logging.getLogger("prime_otel")


class StepLedger(Protocol):
    """What the uploader keeps in the sync's ledger: per step, the object key and whether it was confirmed."""

    steps: dict[str, dict[str, Any]]
    refused: dict[str, dict[str, int]]
    delivered: dict[str, int]


class StepEpisodes:
    """The episodes of the sampled steps, gathered from ``episodes.jsonl`` in file order."""

    def __init__(self, step_interval: int) -> None:
        self.step_interval = step_interval
        self.by_step: dict[int, list[Mapping[str, Any]]] = {}

    def add(self, record: Mapping[str, Any]) -> None:
        step = training_step(record)
        if step is not None and step % self.step_interval == 0:
            self.by_step.setdefault(step, []).append(record)


class StepObjectUploader:
    sink = "rft_samples"

    def __init__(
        self,
        api: TrainingRunsAPI,
        storage: ObjectStorage,
        run_id: str,
        ledger: StepLedger,
        *,
        save: Callable[[], None],
    ) -> None:
        self._api = api
        self._storage = storage
        self._run_id = run_id
        self._ledger = ledger
        self._save = save
        self.confirmed = 0
        self.requests = 0

    @property
    def available(self) -> bool:
        return parquet_available()

    def upload(self, steps: StepEpisodes, on_step: Callable[[], None] = lambda: None) -> None:
        for step in sorted(steps.by_step):
            episodes = steps.by_step[step]
            entry = self._ledger.steps.get(str(step), {})
            if entry.get("confirmed") or entry.get("refused"):
                continue
            recorded = entry.get("key")
            if recorded is not None and self._confirmed_again(step, str(recorded), len(episodes)):
                on_step()
                continue
            # Nothing recorded, or the platform refused the recorded key (never registered): upload afresh.
            key = self._put(step, episodes)
            if key is None:
                continue
            self.requests += 1
            try:
                self._api.confirm(self._run_id, step, key)
            except Exception as exc:
                if not is_record_rejection(exc):
                    raise  # the key stays recorded: the next sync confirms it again
                self._refuse(step, len(episodes), exc)
                continue
            self._delivered(step, key, len(episodes))
            on_step()

    def _confirmed_again(self, step: int, key: str, episodes: int) -> bool:
        """A key an earlier sync recorded, confirmed again by the rule a spool sync and the gateway use: whether
        it is registered now (False: refused, never registered). Undecided, the sync stops with the key kept."""
        self.requests += 1
        outcome = confirm_again(self._api, self._run_id, step, key)
        if outcome.registered is None:
            assert outcome.error is not None
            raise outcome.error  # the key stays recorded: the next sync confirms it again
        if outcome.registered:
            self._delivered(step, key, episodes)
        return outcome.registered

    def _delivered(self, step: int, key: str, episodes: int) -> None:
        self._ledger.steps[str(step)] = {"key": key, "confirmed": True, "episodes": episodes}
        self._ledger.delivered[self.sink] = self._ledger.delivered.get(self.sink, 0) + episodes
        self.confirmed += episodes
        self._save()

    def _put(self, step: int, episodes: list[Mapping[str, Any]]) -> str | None:
        """Upload the step's object; its key, recorded before the confirm (None when the step has no row)."""
        payload = episodes_to_parquet_bytes(episodes, self._run_id, step)
        if payload is None:
            return None
        try:
            url, key = self._api.presign(self._run_id, step)
            self.requests += 1
            self._storage.put(url, payload)
            self.requests += 1
        except Exception as exc:
            if not is_record_rejection(exc):
                raise  # an unconfirmed object is invisible: the next sync uploads the step afresh
            self._refuse(step, len(episodes), exc)
            return None
        self._ledger.steps[str(step)] = {"key": key, "confirmed": False, "episodes": len(episodes)}
        self._save()
        return str(key)

    def _refuse(self, step: int, episodes: int, error: BaseException) -> None:
        reason = failure_reason(error)
        reasons = self._ledger.refused.setdefault(self.sink, {})
        reasons[reason] = reasons.get(reason, 0) + episodes
        self._ledger.steps[str(step)] = {"refused": reason, "episodes": episodes}
        self._save()
        _logger.warning("the platform refused the sample object of step %d for good: %s", step, reason)
