"""External training runs: create, status, finalize, metrics, and Parquet samples.

Samples travel presign → object-storage PUT → confirm. The storage PUT goes through
:class:`ObjectStorage`, a bare client: the presigned URL carries its own authorisation, so
platform credentials must never reach the storage host.
"""

from __future__ import annotations

import logging
import random as _random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from .._types import EnvironmentRef, RunStatus, TrainingSpec
from ..errors import APIError, RetryableAPIError, TransportError
from ._failures import backoff_seconds, extract_error, transport_failure
from ._http import UPLOAD_TIMEOUT, LazyClient, PlatformHTTP, RequestCounters, encode_json, suppressed_instrumentation
from ._transport import transport_for
from ._urls import path_segment

logger = logging.getLogger(__name__)

STORAGE_ATTEMPTS = 3


def build_create_body(
    *,
    base_model: str,
    environments: Sequence[EnvironmentRef],
    team_id: str,
    training: TrainingSpec | None = None,
    name: str | None = None,
    run_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``POST /rft/external-runs`` body; optional keys are omitted when None (and an empty run_config)."""
    spec = training or TrainingSpec()
    body: dict[str, Any] = {
        "base_model": base_model,
        "max_steps": int(spec.max_steps),
        # Passed through unresolved: the RFT API resolves hub ids, slugs and names itself.
        "environments": [_environment_entry(ref) for ref in environments],
        "team_id": team_id,
    }
    optional = {
        "name": name,
        "batch_size": spec.batch_size,
        "rollouts_per_example": spec.rollouts_per_example,
        "seq_len": spec.seq_len,
        "run_config": dict(run_config) if run_config else None,
        "wandb_project": spec.wandb_project,
        "wandb_entity": spec.wandb_entity,
        "wandb_run_name": spec.wandb_run_name,
    }
    body.update((key, value) for key, value in optional.items() if value is not None)
    return body


def _environment_entry(ref: EnvironmentRef) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": ref.id or ref.slug or ref.name}
    if ref.version_id is not None:
        entry["version_id"] = ref.version_id
    return entry


def _status_body(status: RunStatus, error_message: str | None) -> dict[str, Any]:
    # The RFT vocabulary is only completed | failed; the finer distinction travels in the message.
    if status is RunStatus.COMPLETED:
        return {"status": "completed"}
    message = error_message or status.value
    if status is not RunStatus.FAILED:
        message = f"{status.value}: {message}"
    return {"status": "failed", "error_message": message}


class TrainingRunsAPI:
    """Calls against ``/rft``; everything but create is replayable (guards and upserts server-side)."""

    build_create_body = staticmethod(build_create_body)

    def __init__(self, http: PlatformHTTP) -> None:
        self._http = http

    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Register the run and return its ``run`` object; never replayed after an ambiguous failure."""
        response = self._http.request("POST", "/rft/external-runs", json=body, idempotent=False)
        run = response.get("run")
        if not isinstance(run, dict) or not run.get("id"):
            raise APIError(f"POST /rft/external-runs returned no run id (keys: {sorted(response)})")
        return run

    def set_status(self, run_id: str, status: RunStatus | str, error_message: str | None = None) -> bool:
        """Close the run; False when the platform had already closed it (409)."""
        run_status = RunStatus(status.lower())
        if run_status is RunStatus.RUNNING:
            raise ValueError("a training run is closed with a terminal status, not running")
        path = f"/rft/external-runs/{path_segment(run_id)}/status"
        try:
            self._http.request("PUT", path, json=_status_body(run_status, error_message))
        except APIError as exc:
            if exc.status_code != 409:
                raise
            logger.info("training run %s is already closed; not marking it %s", run_id, run_status.value)
            return False
        return True

    def finalize(self, run_id: str) -> None:
        """Compare-and-set RUNNING → COMPLETED server-side, so a replay is harmless."""
        self._http.request("POST", "/rft/finalize", json={"run_id": run_id, "exit_code": 0}, idempotent=True)

    def post_metrics(self, run_id: str, row: Mapping[str, Any]) -> int:
        """One metrics row; the server keeps one row per step, so a replay merges instead of duplicating.
        Returns the size of the body sent."""
        body = encode_json({"run_id": run_id, "metrics": dict(row)})
        self._http.request("POST", "/rft/metrics", content=body, idempotent=True)
        return len(body)

    def presign(self, run_id: str, step: int) -> tuple[str, str]:
        """``(upload URL, object key)`` for one Parquet object of ``step``; a presign only mints a URL."""
        response = self._http.request(
            "POST", "/rft/samples/presign", json={"run_id": run_id, "step": step}, idempotent=True
        )
        data = response.get("data") or response
        if not isinstance(data, Mapping):
            data = {}
        url = data.get("presignedUrl") or data.get("presigned_url")
        key = data.get("s3Key") or data.get("s3_key")
        if not url or not key:
            raise APIError(f"POST /rft/samples/presign returned no upload URL or key (keys: {sorted(data)})")
        return str(url), str(key)

    def confirm(self, run_id: str, step: int, key: str) -> None:
        """Register an uploaded object for ``(run, step)``; confirming a key twice registers it once."""
        body = {"run_id": run_id, "step": step, "s3_key": key}
        self._http.request("POST", "/rft/samples/confirm", json=body, idempotent=True)


class ObjectStorage:
    """PUTs Parquet bytes to presigned URLs: no platform headers, no redirects, three attempts."""

    def __init__(
        self,
        *,
        timeout: httpx.Timeout = UPLOAD_TIMEOUT,
        max_attempts: int = STORAGE_ATTEMPTS,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        random: Callable[[], float] = _random.random,
    ) -> None:
        self._max_attempts = max(1, max_attempts)
        self._sleep = sleep
        self._random = random
        self._counters = RequestCounters()
        self._client = LazyClient(
            lambda: httpx.Client(transport=transport or transport_for(None), follow_redirects=False, timeout=timeout)
        )

    @property
    def requests(self) -> int:
        return self._counters.requests

    @property
    def bytes_sent(self) -> int:
        return self._counters.bytes_sent

    def put(self, url: str, payload: bytes) -> None:
        """Store ``payload``; transport errors, 429 and 5xx are retried (same key, same bytes), other statuses not."""
        # The query string is the signature: keep it out of messages and logs.
        parts = urlsplit(url)
        what = f"storage PUT {parts.netloc}{parts.path}"
        for attempt in range(self._max_attempts):
            try:
                self._attempt(url, payload, what)
                return
            except (RetryableAPIError, TransportError):
                if attempt + 1 >= self._max_attempts:
                    raise
                # Storage does not negotiate through Retry-After: plain backoff.
                self._sleep(backoff_seconds(attempt, self._random))

    def _attempt(self, url: str, payload: bytes, what: str) -> None:
        client = self._client.get()
        self._counters.count(payload)
        try:
            with suppressed_instrumentation():
                response = client.put(url, content=payload, headers={"Content-Type": "application/parquet"})
        except httpx.RequestError as exc:
            raise transport_failure(exc, what) from exc
        if response.is_success:
            return
        status = response.status_code
        code, message = extract_error(response)
        error_type = RetryableAPIError if status == 429 or status >= 500 else APIError
        raise error_type(f"{what}: HTTP {status}: {message}", status_code=status, code=code)

    def close(self) -> None:
        self._client.close()

    def reset_after_fork(self) -> None:
        """In a forked child: drop the parent's client unclosed; the next PUT builds a fresh one."""
        self._counters.reset_after_fork()
        self._client.reset_after_fork()
