"""The ``prime-traces`` client every Prime Traces upload goes through, gzipping with ISA-L.

prime-traces gzips each upload with the standard library at level 9, about 60 MB/s on trace JSONL: for a
typical episode that costs about as much CPU as encoding it. ISA-L at level 2 takes a tenth to a seventh of that
for a body about 16% larger. Gzip is transport-only on this API (the idempotency key and every limit are over the
uncompressed bytes), so the receipts, replays and limits are unchanged. Where no ISA-L wheel is installed, or
the installed prime-traces no longer has the two methods overridden here, the stock client is used.
"""

from __future__ import annotations

import inspect
from typing import Any

from prime_traces import TracesAPIClient, TracesClient

from ._http import meter_request
from ._transport import transport_for

try:
    from isal import igzip

    HAVE_ISAL = True
except ImportError:  # a platform without an ISA-L wheel keeps prime-traces' own gzip
    HAVE_ISAL = False

ISAL_LEVEL = 2


def isal_gzip(body: bytes) -> bytes:
    """``body`` as one gzip member by ISA-L; mtime=0 so that a retry sends the same bytes."""
    gzipped: bytes = igzip.compress(body, compresslevel=ISAL_LEVEL, mtime=0)
    return gzipped


class IsalGzipTracesAPIClient(TracesAPIClient):
    """prime-traces' API client with every upload part gzipped by ISA-L instead of zlib at level 9."""

    def upload_batch(self, body: bytes, idempotency_key: str, **options: Any) -> dict[str, Any]:
        # The parent would gzip with zlib before building the parts; the parts are gzipped below instead.
        result: dict[str, Any] = super().upload_batch(body, idempotency_key, **{**options, "compress": False})
        return result

    def _multipart_files(
        self, body: bytes, *, schema_version: int, context: dict[str, str] | None, compressed: bytes | None
    ) -> dict[str, Any]:
        files: dict[str, Any] = super()._multipart_files(
            body, schema_version=schema_version, context=context, compressed=isal_gzip(body)
        )
        return files


def gzip_hooks_fit(api_type: type) -> bool:
    """Whether ``api_type`` builds its upload the way :class:`IsalGzipTracesAPIClient` overrides it (prime-traces
    0.0.10): an ``upload_batch`` taking ``compress`` and a ``_multipart_files`` taking the gzipped part."""
    upload = getattr(api_type, "upload_batch", None)
    parts = getattr(api_type, "_multipart_files", None)
    if not callable(upload) or not callable(parts):
        return False
    return "compress" in inspect.signature(upload).parameters and {
        "body",
        "schema_version",
        "context",
        "compressed",
    } <= set(inspect.signature(parts).parameters)


USE_ISAL = HAVE_ISAL and gzip_hooks_fit(TracesAPIClient)


def traces_client(*, api_key: str, base_url: str, team_id: str | None) -> TracesClient:
    """A Prime Traces client for one run or sync, on the process's shared transport for ``base_url``."""
    api_type = IsalGzipTracesAPIClient if USE_ISAL else TracesAPIClient
    api = api_type(api_key=api_key, base_url=base_url, team_id=team_id or "", transport=transport_for(base_url))
    api.client.event_hooks["request"].append(meter_request)  # a sink's report counts every upload attempt
    return TracesClient(api)
