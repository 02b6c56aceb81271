"""A strict ``multipart/form-data`` reader that keeps each part's own headers (``Content-Encoding``)."""

from __future__ import annotations

from dataclasses import dataclass
from email.message import Message


class MultipartError(ValueError):
    pass


@dataclass(frozen=True)
class Part:
    name: str
    filename: str | None
    headers: dict[str, str]
    content: bytes


def _header_params(header: str, value: str) -> Message:
    message = Message()
    message[header] = value
    return message


def boundary_of(content_type: str | None) -> bytes:
    if not content_type:
        raise MultipartError("missing Content-Type")
    message = _header_params("content-type", content_type)
    if message.get_content_type() != "multipart/form-data":
        raise MultipartError(f"expected multipart/form-data, got {message.get_content_type()}")
    boundary = message.get_param("boundary")
    if not isinstance(boundary, str) or not boundary or len(boundary) > 200:
        raise MultipartError("missing or invalid multipart boundary")
    return boundary.encode("latin-1")


def parse_multipart(body: bytes, content_type: str | None) -> list[Part]:
    delimiter = b"--" + boundary_of(content_type)
    if body.startswith(delimiter):
        position = len(delimiter)
    else:
        start = body.find(b"\r\n" + delimiter)
        if start < 0:
            raise MultipartError("no multipart boundary in the body")
        position = start + 2 + len(delimiter)
    parts: list[Part] = []
    while True:
        if body.startswith(b"--", position):
            return parts
        line_end = body.find(b"\r\n", position)
        if line_end < 0 or body[position:line_end].strip(b" \t"):
            raise MultipartError("malformed multipart delimiter line")
        headers_end = body.find(b"\r\n\r\n", line_end)
        if headers_end < 0:
            raise MultipartError("unterminated part headers")
        headers = _parse_headers(body[line_end + 2 : headers_end])
        content_start = headers_end + 4
        content_end = body.find(b"\r\n" + delimiter, content_start)
        if content_end < 0:
            raise MultipartError("unterminated multipart body")
        parts.append(_part(headers, body[content_start:content_end]))
        position = content_end + 2 + len(delimiter)


def _parse_headers(block: bytes) -> dict[str, str]:
    headers: dict[str, str] = {}
    if not block:
        return headers
    for raw in block.split(b"\r\n"):
        name, sep, value = raw.decode("utf-8", errors="replace").partition(":")
        if not sep:
            raise MultipartError(f"malformed part header: {raw[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    return headers


def _part(headers: dict[str, str], content: bytes) -> Part:
    disposition = headers.get("content-disposition")
    if disposition is None:
        raise MultipartError("part without Content-Disposition")
    params = _header_params("content-disposition", disposition)
    name = params.get_param("name", header="content-disposition")
    filename = params.get_param("filename", header="content-disposition")
    if not isinstance(name, str):
        raise MultipartError("part without a name")
    return Part(name, filename if isinstance(filename, str) else None, headers, content)
