"""Platform client: base-URL normalisation, an httpx client with per-call retry safety, and the APIs on top."""

from __future__ import annotations

from ._evals import ERROR_MESSAGE_LIMIT, EvaluationsAPI, build_create_body
from ._failures import PlatformTimeoutError, PlatformTransportError
from ._http import (
    DEFAULT_TIMEOUT,
    MAX_ATTEMPTS,
    UPLOAD_TIMEOUT,
    PlatformHTTP,
    encode_json,
    meter_request,
    metered_requests,
    suppressed_instrumentation,
)
from ._pacing import RequestPacer, platform_limit
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
    "DEFAULT_TIMEOUT",
    "ERROR_MESSAGE_LIMIT",
    "INTERNAL_API_PATH",
    "MAX_ATTEMPTS",
    "PUBLIC_API_PATH",
    "STORAGE_ATTEMPTS",
    "UPLOAD_TIMEOUT",
    "ApiRoot",
    "EvaluationsAPI",
    "ObjectStorage",
    "PlatformHTTP",
    "PlatformTimeoutError",
    "PlatformTransportError",
    "RequestPacer",
    "StoredSamples",
    "TrainingRunsAPI",
    "build_create_body",
    "encode_json",
    "eval_dashboard_url",
    "meter_request",
    "metered_requests",
    "normalize_traces_url",
    "platform_limit",
    "sample_key",
    "split_api_root",
    "strip_config_url",
    "suppressed_instrumentation",
    "traces_client",
    "training_dashboard_url",
    "transport_for",
]
