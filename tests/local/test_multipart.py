"""The multipart parser of the traces upload: good bodies parse, malformed ones are a clear error, never a crash."""

from __future__ import annotations

import httpx
import pytest

from prime_otel.local._multipart import MultipartError, parse_multipart


def _encoded(files: dict[str, tuple[str | None, bytes, str]]) -> tuple[bytes, str]:
    request = httpx.Request("POST", "http://x/", files=files)
    return request.read(), request.headers["content-type"]


def test_an_upload_built_by_httpx_parses_into_its_parts_with_headers() -> None:
    body, content_type = _encoded(
        {
            "metadata": (None, b'{"schema_version": 1}', "application/json"),
            "traces": ("traces.jsonl", b'{"id":"t1"}\n--not-a-boundary\n', "application/x-ndjson"),
        }
    )
    metadata, traces = parse_multipart(body, content_type)
    assert (metadata.name, metadata.filename, metadata.content) == ("metadata", None, b'{"schema_version": 1}')
    assert (traces.name, traces.filename) == ("traces", "traces.jsonl")
    assert traces.headers["content-type"] == "application/x-ndjson"
    assert traces.content == b'{"id":"t1"}\n--not-a-boundary\n'


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"", "multipart/form-data; boundary=abc"),
        (b'--abc\r\nContent-Disposition: form-data; name="a"\r\n\r\nunterminated', "multipart/form-data; boundary=abc"),
        (b"--abc\r\nno colon here\r\n\r\nx\r\n--abc--\r\n", "multipart/form-data; boundary=abc"),
        (b"--abc\r\n\r\nno disposition\r\n--abc--\r\n", "multipart/form-data; boundary=abc"),
        (b"whatever", None),
        (b"whatever", "text/plain"),
        (b"whatever", "multipart/form-data"),
    ],
)
def test_malformed_bodies_raise_a_multipart_error(body: bytes, content_type: str | None) -> None:
    with pytest.raises(MultipartError):
        parse_multipart(body, content_type)
