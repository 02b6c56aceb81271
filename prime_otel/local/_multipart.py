"""A strict ``multipart/form-data`` reader on python-multipart that keeps each part's own headers
(``Content-Encoding``), which form parsers drop for plain fields."""

from __future__ import annotations

from dataclasses import dataclass

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header


class MultipartError(ValueError):
    pass


@dataclass(frozen=True)
class Part:
    name: str
    filename: str | None
    headers: dict[str, str]
    content: bytes


def boundary_of(content_type: str | None) -> bytes:
    if not content_type:
        raise MultipartError("missing Content-Type")
    media_type, params = parse_options_header(content_type)
    if media_type != b"multipart/form-data":
        raise MultipartError(f"expected multipart/form-data, got {media_type.decode('latin-1')}")
    boundary = params.get(b"boundary")
    if not boundary:
        raise MultipartError("missing or invalid multipart boundary")
    return boundary


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


class _PartCollector:
    """Callbacks for ``MultipartParser``: assembles each part's raw headers and content."""

    def __init__(self) -> None:
        self.raw_parts: list[tuple[dict[str, bytes], bytes]] = []
        self.finished = False
        self._headers: dict[str, bytes] = {}
        self._field = bytearray()
        self._value = bytearray()
        self._content = bytearray()

    def on_part_begin(self) -> None:
        self._headers = {}
        self._content = bytearray()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._field += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def on_header_end(self) -> None:
        self._headers[self._field.decode("latin-1").strip().lower()] = bytes(self._value).strip(b" \t")
        self._field = bytearray()
        self._value = bytearray()

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        self._content += data[start:end]

    def on_part_end(self) -> None:
        self.raw_parts.append((self._headers, bytes(self._content)))

    def on_end(self) -> None:
        self.finished = True


def parse_multipart(body: bytes, content_type: str | None) -> list[Part]:
    boundary = boundary_of(content_type)
    collector = _PartCollector()
    try:
        parser = MultipartParser(
            boundary,
            {
                "on_part_begin": collector.on_part_begin,
                "on_header_field": collector.on_header_field,
                "on_header_value": collector.on_header_value,
                "on_header_end": collector.on_header_end,
                "on_part_data": collector.on_part_data,
                "on_part_end": collector.on_part_end,
                "on_end": collector.on_end,
            },
        )
        parser.write(body)
        parser.finalize()
    except FormParserError as exc:
        raise MultipartError(str(exc)) from exc
    # python-multipart's finalize() does not check that the closing delimiter arrived.
    if not collector.finished:
        raise MultipartError("unterminated multipart body")
    return [_part(headers, content) for headers, content in collector.raw_parts]


def _part(raw_headers: dict[str, bytes], content: bytes) -> Part:
    disposition = raw_headers.get("content-disposition")
    if disposition is None:
        raise MultipartError("part without Content-Disposition")
    _, params = parse_options_header(disposition.decode("latin-1"))
    name = params.get(b"name")
    if name is None:
        raise MultipartError("part without a name")
    filename = params.get(b"filename")
    headers = {key: _text(value) for key, value in raw_headers.items()}
    return Part(_text(name), None if filename is None else _text(filename), headers, content)
