"""The evaluations API: environments hub resolution, create, update, status, samples, finalize."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from .._types import EnvironmentRef, RunStatus, crashed_message
from ..errors import APIError, EnvironmentResolutionError
from ._http import UPLOAD_TIMEOUT, PlatformHTTP
from ._urls import path_segment

logger = logging.getLogger(__name__)

#: The server caps ``error_message``; longer text is cut here rather than rejected there.
ERROR_MESSAGE_LIMIT = 4096
#: Rows per page when reading stored samples back (the page size the platform's own CLI reads with).
SAMPLE_PAGE_ROWS = 100
#: Attempts of a read made to decide what a failed write did: a read that keeps failing decides nothing.
READ_ATTEMPTS = 3

# The evaluations API has no "crashed": a crash is a failure the process never got to explain.
_WIRE_STATUS = {RunStatus.FAILED: "FAILED", RunStatus.CANCELLED: "CANCELLED", RunStatus.CRASHED: "FAILED"}


def build_create_body(
    name: str,
    environments: Sequence[Mapping[str, Any]],
    tags: Sequence[str],
    model: str | None = None,
    dataset: str | None = None,
    framework: str | None = None,
    description: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    team_id: str | None = None,
) -> dict[str, Any]:
    """The ``POST /evaluations/`` body, keys in fixed order; None (and an empty metadata) is omitted, ``""`` kept."""
    body: dict[str, Any] = {"name": name, "environments": [dict(env) for env in environments], "tags": list(tags)}
    optional = {
        "model_name": model,
        "dataset": dataset,
        "framework": framework,
        "description": description,
        "metadata": dict(metadata) if metadata else None,
        "team_id": team_id,
    }
    body.update((key, value) for key, value in optional.items() if value is not None)
    return body


def _evaluation_path(evaluation_id: str) -> str:
    return f"/evaluations/{path_segment(evaluation_id)}"


class EvaluationsAPI:
    """Calls against ``/evaluations`` and ``/environmentshub``; retry safety is declared per call."""

    build_create_body = staticmethod(build_create_body)

    def __init__(self, http: PlatformHTTP) -> None:
        self._http = http

    def resolve_environments(self, refs: Sequence[EnvironmentRef], team_id: str | None) -> list[dict[str, Any]]:
        """``[{"id", "version_id"?}]``; a ref that cannot be resolved raises rather than being skipped."""
        resolved = []
        for ref in refs:
            entry: dict[str, Any] = {"id": ref.id or self._lookup(ref, team_id)}
            if ref.version_id is not None:
                entry["version_id"] = ref.version_id
            resolved.append(entry)
        return resolved

    def _lookup(self, ref: EnvironmentRef, team_id: str | None) -> str:
        label = ref.slug or ref.name
        try:
            if ref.slug:
                owner, name = ref.slug.split("/", 1)
                response = self._http.request(
                    "GET", f"/environmentshub/{path_segment(owner)}/{quote(name, safe='/')}/@latest"
                )
                data = response.get("data") or response
            else:
                body: dict[str, Any] = {"name": ref.name}
                if team_id is not None:
                    body["team_id"] = team_id
                # Get-or-create by name: a replay answers with the same environment.
                response = self._http.request("POST", "/environmentshub/resolve", json=body, idempotent=True)
                data = response.get("data")
        except APIError as exc:
            raise EnvironmentResolutionError(f"could not resolve environment {label!r}: {exc}") from exc
        environment_id = data.get("id") if isinstance(data, Mapping) else None
        if not environment_id:
            raise EnvironmentResolutionError(f"the environments hub returned no id for {label!r}")
        return str(environment_id)

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Register the evaluation; never replayed after an ambiguous failure (it would leave an orphaned twin)."""
        response = self._http.request("POST", "/evaluations/", json=body, idempotent=False)
        if not response.get("evaluation_id"):
            raise APIError(f"POST /evaluations/ returned no evaluation_id (keys: {sorted(response)})")
        return response

    def update(
        self, evaluation_id: str, metadata: Mapping[str, Any] | None = None, metrics: Mapping[str, Any] | None = None
    ) -> None:
        """Replace the metadata document and/or the metrics; nothing is sent when both are empty."""
        body: dict[str, Any] = {}
        if metadata:
            body["metadata"] = dict(metadata)
        if metrics:
            body["metrics"] = dict(metrics)
        if body:
            self._http.request("PUT", _evaluation_path(evaluation_id), json=body)

    def set_status(self, evaluation_id: str, status: RunStatus | str, error_message: str | None = None) -> bool:
        """Close a run that did not complete; False when the platform had already closed it (409) with another
        status. A 409 finding it closed with this very status (typically this call's own replayed first attempt,
        which took effect) is success.

        A 404 (a deployment without the status field) propagates as ``NotFoundError``.
        """
        run_status = RunStatus(status.lower())
        if run_status not in _WIRE_STATUS:
            raise ValueError(f"an evaluation is closed as failed, cancelled or crashed, not {run_status.value}")
        message = error_message
        if run_status is RunStatus.CRASHED:
            message = crashed_message(error_message)
        body: dict[str, Any] = {"status": _WIRE_STATUS[run_status]}
        if message:
            body["error_message"] = message[:ERROR_MESSAGE_LIMIT]
        try:
            self._http.request("PUT", _evaluation_path(evaluation_id), json=body)
        except APIError as exc:
            if exc.status_code != 409:
                raise
            if self._status_of(evaluation_id) == body["status"]:
                return True
            logger.info("evaluation %s is already closed; not marking it %s", evaluation_id, run_status.value)
            return False
        return True

    def _status_of(self, evaluation_id: str) -> str | None:
        try:
            status = self.get(evaluation_id).get("status")
        except APIError as exc:
            logger.info("could not read evaluation %s back: %s", evaluation_id, exc)
            return None
        return status if isinstance(status, str) else None

    def append_samples(self, evaluation_id: str, samples: bytes | Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Append v0 rows (or an already encoded ``{"samples": [...]}`` body); append-only, so never replayed."""
        path = f"{_evaluation_path(evaluation_id)}/samples"
        if isinstance(samples, bytes):
            return self._http.request("POST", path, content=samples, idempotent=False, timeout=UPLOAD_TIMEOUT)
        body = {"samples": list(samples)}
        return self._http.request("POST", path, json=body, idempotent=False, timeout=UPLOAD_TIMEOUT)

    def get(self, evaluation_id: str) -> dict[str, Any]:
        """The evaluation as the platform keeps it (``status`` among its fields)."""
        return self._http.request("GET", _evaluation_path(evaluation_id), max_attempts=READ_ATTEMPTS)

    def sample_page(self, evaluation_id: str, page: int, limit: int = SAMPLE_PAGE_ROWS) -> dict[str, Any]:
        """One page (numbered from 1) of the stored v0 rows: ``{"samples": [...], "total"?, "page"?, "limit"?}``."""
        path = f"{_evaluation_path(evaluation_id)}/samples?page={page}&limit={limit}"
        return self._http.request("GET", path, max_attempts=READ_ATTEMPTS)

    def finalize(self, evaluation_id: str, metrics: Mapping[str, Any] | None) -> dict[str, Any]:
        """Complete the run; it enqueues the statistics task, so it is never replayed after an ambiguous failure."""
        body = {"metrics": dict(metrics) if metrics else {}}
        return self._http.request("POST", f"{_evaluation_path(evaluation_id)}/finalize", json=body, idempotent=False)
