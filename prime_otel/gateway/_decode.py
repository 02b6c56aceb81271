"""OTLP/HTTP bodies: content types, compression, OTLP/JSON ids, and responses in the request's own content type
(the requests themselves are opened in ``_envelope.py``).

OTLP/JSON carries trace and span ids as hex, which protobuf's JSON parser would silently read as base64 (a
hex id is valid base64, giving 24-byte ids), so ids are converted before parsing.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
#: Decoded request bodies above this are refused; the Collector's exporters send far less.
MAX_BODY_BYTES = 128 * 1024 * 1024

_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})
# zlib window bits: gzip member, zlib stream, raw deflate.
_GZIP, _ZLIB, _RAW = 31, 15, -15


class RequestError(Exception):
    """A request the receiver refuses: ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def malformed(message: str) -> RequestError:
    return RequestError(400, message)


def media_type(content_type: str | None) -> str:
    """``PROTOBUF`` or ``JSON`` from a ``Content-Type`` header; anything else is refused with 415."""
    value = (content_type or "").split(";", 1)[0].strip().lower()
    if value in (PROTOBUF, "application/protobuf"):
        return PROTOBUF
    if value == JSON:
        return JSON
    raise RequestError(415, f"unsupported content type {content_type!r}; send {PROTOBUF} or {JSON}")


def decompress(body: bytes, encoding: str | None, limit: int = MAX_BODY_BYTES) -> bytes:
    """The body without its ``Content-Encoding`` (identity, gzip or deflate), at most ``limit`` bytes."""
    value = (encoding or "identity").strip().lower()
    if value in ("", "identity"):
        return body
    if value in ("gzip", "x-gzip"):
        return _inflate(body, _GZIP, limit)
    if value == "deflate":
        try:
            return _inflate(body, _ZLIB, limit)
        except RequestError as exc:
            if exc.status == 413:
                raise
            # Some senders mean raw deflate by "deflate".
            return _inflate(body, _RAW, limit)
    raise RequestError(415, f"unsupported content encoding {encoding!r}; send gzip, deflate or identity")


def _inflate(body: bytes, window_bits: int, limit: int) -> bytes:
    inflater = zlib.decompressobj(window_bits)
    try:
        data = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise malformed(f"the body is not valid compressed data: {exc}") from None
    if len(data) > limit:
        raise RequestError(413, f"the decompressed body exceeds {limit} bytes")
    if not inflater.eof:
        raise malformed("the compressed body is truncated")
    return data


def hex_ids_to_base64(value: Any) -> Any:
    """The document with every trace/span id rewritten from OTLP's hex to proto3-JSON's base64, in place."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _ID_KEYS and isinstance(item, str):
                value[key] = _hex_to_base64(key, item)
            elif isinstance(item, (dict, list)):
                hex_ids_to_base64(item)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)):
                hex_ids_to_base64(item)
    return value


def _hex_to_base64(key: str, text: str) -> str:
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise malformed(f"{key} {text!r} is not a hex id (OTLP/JSON ids are hex)") from None
    if len(raw) not in (0, 8, 16):
        raise malformed(f"{key} {text!r} is not an 8- or 16-byte id")
    return base64.b64encode(raw).decode("ascii")


def encode_response(message: Message, kind: str) -> bytes:
    """The response body in the request's content type (OTLP/JSON with integer enums)."""
    if kind == PROTOBUF:
        return message.SerializeToString()
    return json_format.MessageToJson(message, indent=None).encode("utf-8")
