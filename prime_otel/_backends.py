"""Run lifecycle on the platform: register or attach, send config and summary, close with a status.

``close_run`` is the one way a run is closed (update, then finalize), used by ``Run.finish()``, the gateway and
``prime-otel sync``.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from ._types import EnvironmentRef, RunKind, RunStatus, TrainingSpec, crashed_message
from .client import (
    ERROR_MESSAGE_LIMIT,
    EvaluationsAPI,
    TrainingRunsAPI,
    eval_dashboard_url,
    training_dashboard_url,
)
from .client._readback import SETTLE_SECONDS
from .errors import APIError, ConfigurationError, NotFoundError, is_ambiguous

_logger = logging.getLogger(__name__)

#: Sends of the evaluation finalize at most: the first, and those after a read-back proved it was not applied.
FINALIZE_ATTEMPTS = 5
#: What an evaluation's status is once a finalize was applied.
FINALIZED_STATUSES = frozenset({"PROCESSING", "COMPLETED"})


@dataclass
class RunSpec:
    kind: RunKind
    name: str | None
    environments: list[EnvironmentRef]
    model: str | None
    framework: str | None
    description: str | None
    tags: list[str]
    config: dict[str, Any]
    team_id: str | None
    training: TrainingSpec | None = None
    frontend_url: str = "https://app.primeintellect.ai"


@dataclass
class OpenedRun:
    id: str
    name: str | None
    url: str | None
    extra: dict[str, Any] = field(default_factory=dict)


class RunBackend(Protocol):
    @property
    def records_status_in_metadata(self) -> bool:
        """True once a status other than completed can only be recorded in the run's metadata."""
        ...

    def create(self, spec: RunSpec) -> OpenedRun: ...
    def attach(self, run_id: str, spec: RunSpec) -> OpenedRun: ...
    def update(self, run_id: str, *, config: dict[str, Any] | None, summary: dict[str, Any] | None) -> None: ...
    def finalize(
        self,
        run_id: str,
        status: RunStatus,
        *,
        summary: dict[str, Any] | None,
        error: str | None,
        config: dict[str, Any] | None,
    ) -> None: ...


def default_eval_name(spec: RunSpec) -> str:
    first = spec.environments[0].display_name if spec.environments else None
    return f"{first or spec.framework or 'eval'}-{secrets.token_hex(4)}"


class EvalBackend:
    """Evaluations (E1 to E7). A status write answering 404 (an older deployment) latches once and falls back
    to recording the status under ``metadata.prime_runs``, merged into the whole config document."""

    def __init__(self, api: EvaluationsAPI, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self._api = api
        self._sleep = sleep
        self._status_endpoint_missing = False

    @property
    def records_status_in_metadata(self) -> bool:
        return self._status_endpoint_missing

    def create(self, spec: RunSpec) -> OpenedRun:
        if not spec.environments:
            raise ConfigurationError("an eval run needs at least one environment (environments=[...])")
        environments = self._api.resolve_environments(spec.environments, spec.team_id)
        name = spec.name or default_eval_name(spec)
        body = self._api.build_create_body(
            name=name,
            environments=environments,
            tags=spec.tags,
            model=spec.model,
            dataset=spec.environments[0].display_name,
            framework=spec.framework,
            description=spec.description,
            metadata=spec.config or None,
            team_id=spec.team_id,
        )
        created = self._api.create(body)
        run_id = str(created["evaluation_id"])
        url = created.get("viewer_url") or eval_dashboard_url(spec.frontend_url, run_id)
        return OpenedRun(id=run_id, name=created.get("name") or name, url=url)

    def attach(self, run_id: str, spec: RunSpec) -> OpenedRun:
        return OpenedRun(id=run_id, name=None, url=eval_dashboard_url(spec.frontend_url, run_id))

    def update(self, run_id: str, *, config: dict[str, Any] | None, summary: dict[str, Any] | None) -> None:
        self._api.update(run_id, metadata=config, metrics=summary)

    def finalize(
        self,
        run_id: str,
        status: RunStatus,
        *,
        summary: dict[str, Any] | None,
        error: str | None,
        config: dict[str, Any] | None,
    ) -> None:
        if status is RunStatus.COMPLETED:
            self._finalize(run_id, summary or {})
            return
        message = _error_message(status, error)
        if not self._status_endpoint_missing:
            try:
                if not self._api.set_status(run_id, status, error):
                    _logger.info("Run %s was already closed on the platform; left as it is", run_id)
                return
            except NotFoundError:
                self._status_endpoint_missing = True
        _logger.warning(
            "Run %s: this platform cannot mark an evaluation %s; the status is recorded under metadata.prime_runs "
            "and the run will keep showing as running",
            run_id,
            status.value,
        )
        document = dict(config or {})
        block = dict(document.get("prime_runs") or {}) if isinstance(document.get("prime_runs"), Mapping) else {}
        block.update({"status": status.value, "error": message})
        document["prime_runs"] = block
        self._api.update(run_id, metadata=document, metrics=None)

    def _finalize(self, run_id: str, summary: dict[str, Any]) -> None:
        """The finalize enqueues the statistics task, so it is never sent again blindly. After an ambiguous
        failure (or a 409) the evaluation's status is read: PROCESSING or COMPLETED means it was applied; RUNNING
        on two reads a settle apart means it was not, and it is sent again. Anything else keeps the error."""
        for attempt in range(1, FINALIZE_ATTEMPTS + 1):
            try:
                self._api.finalize(run_id, summary)
                return
            except APIError as exc:
                if not (is_ambiguous(exc) or exc.status_code == 409):
                    raise
                status = self._status_after_failure(run_id)
                if status in FINALIZED_STATUSES:
                    _logger.info(
                        "Run %s: the finalize was applied (%s) although its answer was %s", run_id, status, exc
                    )
                    return
                if status != "RUNNING" or exc.status_code == 409 or attempt == FINALIZE_ATTEMPTS:
                    raise
                _logger.info("Run %s: the finalize was not applied (%s); sending it again", run_id, exc)

    def _status_after_failure(self, run_id: str) -> str | None:
        """The evaluation's status; RUNNING only when two reads a settle apart agree. None when unreadable."""
        try:
            status = self._api.get(run_id).get("status")
            if status == "RUNNING":
                self._sleep(SETTLE_SECONDS)
                status = self._api.get(run_id).get("status")
        except APIError as exc:
            _logger.warning("Run %s: could not read the evaluation back after a failed finalize: %s", run_id, exc)
            return None
        return status if isinstance(status, str) else None


class TrainingBackend:
    """External training runs (T1 to T3): completed through the compare-and-set finalize, the rest as ``failed``."""

    def __init__(self, api: TrainingRunsAPI) -> None:
        self._api = api

    @property
    def records_status_in_metadata(self) -> bool:
        return False

    def create(self, spec: RunSpec) -> OpenedRun:
        if not spec.model:
            raise ConfigurationError("a training run needs model=... (the base model)")
        if not spec.team_id:
            raise ConfigurationError("a training run needs a team: pass team_id=... or set PRIME_TEAM_ID")
        body = self._api.build_create_body(
            base_model=spec.model,
            environments=spec.environments,
            team_id=spec.team_id,
            training=spec.training,
            name=spec.name,
            run_config=spec.config or None,
        )
        run = self._api.create(body)
        run_id = str(run["id"])
        return OpenedRun(
            id=run_id, name=run.get("name") or spec.name, url=training_dashboard_url(spec.frontend_url, run_id)
        )

    def attach(self, run_id: str, spec: RunSpec) -> OpenedRun:
        return OpenedRun(id=run_id, name=None, url=training_dashboard_url(spec.frontend_url, run_id))

    def update(self, run_id: str, *, config: dict[str, Any] | None, summary: dict[str, Any] | None) -> None:
        """Training runs have no update endpoint: config travels at creation only."""

    def finalize(
        self,
        run_id: str,
        status: RunStatus,
        *,
        summary: dict[str, Any] | None,
        error: str | None,
        config: dict[str, Any] | None,
    ) -> None:
        if status is RunStatus.COMPLETED:
            try:
                self._api.finalize(run_id)
                return
            except Exception as exc:
                _logger.info(
                    "Run %s: /rft/finalize failed (%s); marking it completed through the status write", run_id, exc
                )
            if not self._api.set_status(run_id, RunStatus.COMPLETED, None):
                _logger.info("Run %s was already closed on the platform; left as it is", run_id)
            return
        if not self._api.set_status(run_id, status, error):
            _logger.info("Run %s was already closed on the platform; left as it is", run_id)


class ClosedAs(Enum):
    """How ``close_run`` left the run on the platform."""

    #: The platform answered the finalize: it shows the run closed.
    CONFIRMED = "confirmed"
    #: The platform cannot hold this status (an older deployment): it is recorded in the run's metadata.
    RECORDED_IN_METADATA = "recorded_in_metadata"
    #: An attached run ended without completing: its status belongs to the launcher that owns it.
    LEFT_TO_LAUNCHER = "left_to_launcher"


def close_run(
    backend: RunBackend,
    run_id: str,
    status: RunStatus,
    *,
    summary: Mapping[str, Any] | None,
    error: str | None,
    config: Mapping[str, Any] | None = None,
    attached: bool = False,
    on_update_failure: Callable[[Exception], None] | None = None,
) -> ClosedAs:
    """Close a run on the platform: send the final config and summary, then the status.

    An attached run's config belongs to its launcher, so it is not sent, and only a completed attached run is
    finalized here. A failed update is handed to ``on_update_failure`` and the finalize still goes (a live run
    closes whatever happened to its summary); without it the failure propagates and nothing is closed (a sync
    tries again next time). A failed finalize always propagates.
    """
    summary_sent = dict(summary) if summary else None
    config_sent = dict(config) if config else None
    try:
        backend.update(run_id, config=None if attached else config_sent, summary=summary_sent)
    except Exception as exc:
        if on_update_failure is None:
            raise
        on_update_failure(exc)
    if attached and status is not RunStatus.COMPLETED:
        _logger.info("Run %s is attached: its %s status is left to the launcher that owns it", run_id, status.value)
        return ClosedAs.LEFT_TO_LAUNCHER
    backend.finalize(run_id, status, summary=summary_sent, error=error, config=config_sent)
    if status is not RunStatus.COMPLETED and backend.records_status_in_metadata:
        return ClosedAs.RECORDED_IN_METADATA
    return ClosedAs.CONFIRMED


def _error_message(status: RunStatus, error: str | None) -> str | None:
    message = error or None
    if status is RunStatus.CRASHED:
        message = crashed_message(message or "process exited without finishing the run")
    return message[:ERROR_MESSAGE_LIMIT] if message else None
