"""Platform client: base-URL normalisation, an httpx client with per-call retry safety, and the APIs on top."""

from __future__ import annotations

from ._evals import ERROR_MESSAGE_LIMIT, EvaluationsAPI, build_create_body
from ._failures import PlatformTimeoutError, PlatformTransportError, is_ambiguous
from ._http import (
    ATTEMPT_LISTENER,
    DEFAULT_TIMEOUT,
    MAX_ATTEMPTS,
    REQUEST_PROGRESS,
    UPLOAD_TIMEOUT,
    PlatformHTTP,
    RequestProgress,
    encode_json,
    suppressed_instrumentation,
)
from ._readback import StoredSamples, sample_key
from ._rft import STORAGE_ATTEMPTS, ObjectStorage, TrainingRunsAPI
from ._traces import traces_client
from ._transport import transport_for
from ._urls import (
    INTERNAL_API_PATH,
    PUBLIC_API_PATH,
    ApiRoot,
    eval_dashboard_url,
    normalize_traces_url,
    split_api_root,
    strip_config_url,
    training_dashboard_url,
)

__all__ = [
    "ATTEMPT_LISTENER",
    "DEFAULT_TIMEOUT",
    "ERROR_MESSAGE_LIMIT",
    "INTERNAL_API_PATH",
    "MAX_ATTEMPTS",
    "PUBLIC_API_PATH",
    "REQUEST_PROGRESS",
    "STORAGE_ATTEMPTS",
    "UPLOAD_TIMEOUT",
    "ApiRoot",
    "EvaluationsAPI",
    "ObjectStorage",
    "PlatformHTTP",
    "PlatformTimeoutError",
    "PlatformTransportError",
    "RequestProgress",
    "StoredSamples",
    "TrainingRunsAPI",
    "build_create_body",
    "encode_json",
    "eval_dashboard_url",
    "is_ambiguous",
    "normalize_traces_url",
    "sample_key",
    "split_api_root",
    "strip_config_url",
    "suppressed_instrumentation",
    "traces_client",
    "training_dashboard_url",
    "transport_for",
]
