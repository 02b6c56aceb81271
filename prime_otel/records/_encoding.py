"""Record helpers shared by every sink: recognising and converting records, stamping the uploaded
copy with the platform run, and the two non-finite policies: dropped (metrics, summaries) or null (records)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from .._types import RunKind
from ._metric_values import python_scalar


class UnencodableRecord(ValueError):
    """A record that cannot become JSON, so no sink can take it; ``reason`` names the problem in a few words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _UnserializableValue(TypeError):
    def __init__(self, value: Any) -> None:
        self.type_name = type(value).__name__
        super().__init__(f"Object of type {self.type_name} is not JSON serializable")


def _refuse(value: Any) -> Any:
    raise _UnserializableValue(value)


# One encoder per style: json.dumps builds a fresh encoder on every call with non-default options.
# Keys of type int, float, bool and None become strings, as in every JSON encoding (pydantic's too).
_COMPACT = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_refuse)


def why_unencodable(error: BaseException) -> str:
    """A short reason for an encoding failure, naming the kind of problem (never the value)."""
    if isinstance(error, UnencodableRecord):
        return error.reason
    if isinstance(error, _UnserializableValue):
        return f"unencodable record: {error.type_name}"
    if isinstance(error, UnicodeError):
        return "invalid string (lone surrogate)"  # the only str that UTF-8 cannot encode
    if isinstance(error, RecursionError):
        return "nesting too deep"
    text = str(error)
    if isinstance(error, ValueError) and text.startswith("Circular reference"):
        return "circular reference"
    if isinstance(error, TypeError) and text.startswith("keys must be"):
        return "non-string key"
    return f"unencodable record: {type(error).__name__}"


def _is_non_finite(error: ValueError) -> bool:
    return not isinstance(error, UnicodeError) and str(error).startswith("Out of range float")


_MAPPING, _RECORD_OBJECT, _NOT_A_RECORD = 1, 2, 3
# What each type is, decided once: log calls check every record, so this stays a dict lookup per record.
_SHAPES: dict[type, int] = {dict: _MAPPING, list: _NOT_A_RECORD, tuple: _NOT_A_RECORD}
_SHAPES_LIMIT = 4096


def _shape(cls: type) -> int:
    shape = _SHAPES.get(cls)
    if shape is None:
        if issubclass(cls, Mapping):
            shape = _MAPPING
        elif callable(getattr(cls, "to_record", None)):  # verifiers Episode/Trace, or any class that follows them
            shape = _RECORD_OBJECT
        else:
            shape = _NOT_A_RECORD
        if len(_SHAPES) < _SHAPES_LIMIT:
            _SHAPES[cls] = shape
    return shape


def loggable(operation: str, records: Iterable[Any]) -> list[Any]:
    """``records`` as a list, after the checks that cost nothing to make on the caller's thread: a record that is
    none at all, or a mapping without a string ``id``, raises (naming its position) before anything is queued."""
    container = type(records)
    if container is not list and container is not tuple:
        if container is str or container is bytes or _shape(container) != _NOT_A_RECORD:
            raise TypeError(
                f"{operation}() takes a list of records, got a single {container.__name__}: wrap it in a list"
            )
        try:
            records = list(records)
        except TypeError:
            raise TypeError(f"{operation}() takes a list of records, not {container.__name__}") from None
    batch = list(records)
    for position, record in enumerate(batch):
        shape = _SHAPES.get(type(record)) or _shape(type(record))
        if shape == _MAPPING:
            record_id = record.get("id")
            if type(record_id) is not str or not record_id:
                _refuse_id(operation, position, record_id)
        elif shape == _NOT_A_RECORD:
            raise TypeError(
                f"{operation}(): record {position} is of type {type(record).__name__}, not a record: pass verifiers "
                "Episode/Trace objects, mappings or objects with to_record(); nothing of this call was logged"
            )
    return batch


def _refuse_id(operation: str, position: int, record_id: Any) -> None:
    if isinstance(record_id, str) and record_id:
        return  # a str subclass
    found = "none" if record_id is None else "''" if record_id == "" else type(record_id).__name__
    raise ValueError(
        f"{operation}(): record {position} has no string 'id' (found {found}); nothing of this call was logged"
    )


def is_episode(record: Any) -> bool:
    """A mapping with a ``traces`` key, or an object with a ``traces`` attribute."""
    if isinstance(record, Mapping):
        return "traces" in record
    return hasattr(record, "traces")


def to_mapping(record: Any) -> Mapping[str, Any]:
    """The record's JSON mapping: a Mapping as is, else the result of its ``to_record()``."""
    if isinstance(record, Mapping):
        return record
    to_record = getattr(record, "to_record", None)
    if not callable(to_record):
        raise TypeError(f"{type(record).__name__} is not a mapping and has no to_record()")
    value = to_record()
    if not isinstance(value, Mapping):
        raise TypeError(f"{type(record).__name__}.to_record() returned {type(value).__name__}, not a mapping")
    return value


def stamp_run(record: Mapping[str, Any], run_id: str, kind: RunKind) -> dict[str, Any]:
    """The copy of ``record`` uploaded to Prime Traces: ``run.id``/``run.type`` set to the platform run on the
    envelope and on every mapping member trace (a member without its own block inherits the envelope's).
    Shallow: only the envelope, the member list, the members and the run blocks are new objects."""
    stamped = dict(record)
    envelope_run = _rekey(stamped.get("run"), run_id, kind)
    stamped["run"] = envelope_run
    members = stamped.get("traces")
    if isinstance(members, list):
        stamped["traces"] = [
            {**member, "run": _rekey(member.get("run") or envelope_run, run_id, kind)}
            if isinstance(member, Mapping)
            else member
            for member in members
        ]
    return stamped


def _rekey(run: Any, run_id: str, kind: RunKind) -> dict[str, Any]:
    keyed = dict(run) if isinstance(run, Mapping) else {}
    keyed["id"] = run_id
    keyed["type"] = kind
    return keyed


def nullify(value: Any) -> Any:
    """``value`` with every NaN/±inf float (subclasses included) replaced by None and tuples turned into lists.
    Containers that hold nothing to replace are returned as they are (the same object)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        changed: dict[Any, Any] | None = None
        for key, item in value.items():
            new = nullify(item)
            if new is not item:
                if changed is None:
                    changed = dict(value)
                changed[key] = new
        return value if changed is None else changed
    if isinstance(value, list):
        items: list[Any] | None = None
        for index, item in enumerate(value):
            new = nullify(item)
            if new is not item:
                if items is None:
                    items = list(value)
                items[index] = new
        return value if items is None else items
    if isinstance(value, tuple):
        return [nullify(item) for item in value]
    return value


_DROP: Any = object()


def clean(values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a run summary fit for strict JSON: numpy and other numeric scalars become plain numbers,
    non-finite floats are dropped, a key whose value is or becomes an empty mapping is dropped, lists and tuples
    become lists without the dropped items. Only identity and type checks are used: an array-like must never be
    compared. (Metrics rows have their own, stricter policy: ``records.metric_row``.)"""
    return _clean_mapping(values)


def _clean_mapping(values: Mapping[Any, Any]) -> dict[Any, Any]:
    cleaned: dict[Any, Any] = {}
    for key, item in values.items():
        kept = _clean(item)
        if kept is _DROP or (isinstance(item, Mapping) and not kept):
            continue
        cleaned[key] = kept
    return cleaned


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else _DROP
    if isinstance(value, Mapping):
        return _clean_mapping(value)
    if isinstance(value, (list, tuple)):
        return [kept for kept in map(_clean, value) if kept is not _DROP]
    if value is None or isinstance(value, (str, int)):
        return value
    scalar = python_scalar(value)
    return value if scalar is None else _clean(scalar)


def compact_json(obj: Any) -> bytes:
    """Compact UTF-8 JSON (``,``/``:`` separators, non-ASCII kept); NaN/Infinity raise ``ValueError``."""
    return _COMPACT.encode(obj).encode("utf-8")


RUN_KEY = "run"
TRACES_KEY = "traces"
# A piece of a split mapping: finished ``"key":value,...`` bytes, or a key whose value is filled in at assembly.
_Piece = bytes | str


class EncodedRecord:
    """A record's compact JSON, encoded once and kept in pieces so both copies a run uploads are joins:
    :attr:`plain` is the record's JSON (the v0 row's ``native_wrapper``) and :meth:`stamped` is the JSON of
    ``stamp_run(record, run_id, kind)`` (the Prime Traces line). Built from a mapping, a record holding NaN/±inf
    is nullified first; :attr:`nullified` tells, and :attr:`record` is the mapping the bytes encode."""

    __slots__ = ("_members", "_pieces", "_record", "_run_json", "nullified", "plain")

    def __init__(self, record: Mapping[str, Any]) -> None:
        """Raises :class:`UnencodableRecord` for a record that is not JSON (NaN/±inf aside)."""
        self.nullified = False
        try:
            try:
                self._encode(record)
            except ValueError as error:
                if not _is_non_finite(error):
                    raise
                record = nullify(dict(record))
                self.nullified = True
                self._encode(record)
        except (TypeError, ValueError, RecursionError) as error:
            raise UnencodableRecord(why_unencodable(error)) from error
        self._record: Mapping[str, Any] | None = record
        self._join()

    @classmethod
    def from_parts(
        cls,
        pieces: list[_Piece],
        run_json: bytes,
        members: list[EncodedMember],
        *,
        record: Mapping[str, Any] | None = None,
    ) -> EncodedRecord:
        """A record encoded elsewhere: ``pieces`` are finished ``"key":value,...`` bytes and the
        placeholder keys ``run`` and ``traces``, the run block's JSON, and the member traces; ``record`` the
        mapping they encode, when the caller has it (else it is decoded on first use)."""
        encoded = cls.__new__(cls)
        encoded.nullified = False
        encoded._record = record
        encoded._pieces, encoded._run_json, encoded._members = pieces, run_json, members
        encoded._join()
        return encoded

    @property
    def has_traces(self) -> bool:
        """The record holds a non-empty ``traces`` list (an episode with member traces)."""
        return bool(self._members)

    @property
    def record(self) -> Mapping[str, Any]:
        if self._record is None:
            self._record = json.loads(self.plain)
        return self._record

    def stamped(self, run_id: str, kind: RunKind) -> bytes:
        """The stamped line for Prime Traces, new keys appended as ``stamp_run`` appends them."""
        run = _stamped_run_json(self._run_json, run_id, kind)
        members = b"[" + b",".join(member.stamped(run, run_id, kind) for member in self._members) + b"]"
        return _assemble(self._pieces, {RUN_KEY: run, TRACES_KEY: members}, append=RUN_KEY)

    def _join(self) -> None:
        members = b"[" + b",".join(member.plain for member in self._members) + b"]"
        self.plain = _assemble(self._pieces, {RUN_KEY: self._run_json, TRACES_KEY: members})

    def _encode(self, record: Mapping[str, Any]) -> None:
        members = record.get(TRACES_KEY)
        if isinstance(members, list):
            self._pieces = _split(record, (RUN_KEY, TRACES_KEY))
            self._members = [EncodedMember(member) for member in members]
        else:
            self._pieces = _split(record, (RUN_KEY,))
            self._members = []
        # Encoded here, inside the caller's NaN check, so stamping never meets a non-finite value.
        self._run_json = compact_json(record.get(RUN_KEY))


class EncodedMember:
    """One member trace of an :class:`EncodedRecord`; a non-mapping member is encoded as it is."""

    __slots__ = ("pieces", "plain", "run")

    def __init__(self, member: Any) -> None:
        if isinstance(member, Mapping):
            self.pieces: list[_Piece] | None = _split(member, (RUN_KEY,))
            self.run = member.get(RUN_KEY)
            self.plain = _assemble(
                self.pieces, {RUN_KEY: compact_json(self.run)} if _placeholds(self.pieces, RUN_KEY) else {}
            )
        else:
            self.pieces, self.run = None, None
            self.plain = compact_json(member)

    @classmethod
    def from_split(cls, pieces: list[_Piece], run: Any, plain: bytes) -> EncodedMember:
        """A mapping member encoded elsewhere: its pieces around ``run`` (a placeholder when it has one), its
        decoded ``run`` block and its JSON."""
        member = cls.__new__(cls)
        member.pieces, member.run, member.plain = pieces, run, plain
        return member

    @classmethod
    def from_json(cls, body: bytes) -> EncodedMember:
        """A member encoded elsewhere as a JSON object without a ``run`` key (it inherits the envelope's)."""
        member = cls.__new__(cls)
        member.pieces = [body[1:-1]] if body != b"{}" else []
        member.run = None
        member.plain = body
        return member

    def stamped(self, envelope_run: bytes, run_id: str, kind: RunKind) -> bytes:
        if self.pieces is None:
            return self.plain
        if self.run:
            return _assemble(self.pieces, {RUN_KEY: compact_json(_rekey(self.run, run_id, kind))}, append=RUN_KEY)
        if not _placeholds(self.pieces, RUN_KEY):
            return b"".join((self.plain[:-1], b',"run":' if self.pieces else b'"run":', envelope_run, b"}"))
        return _assemble(self.pieces, {RUN_KEY: envelope_run})


# Stamped run blocks by (the producer's block as JSON, run id, kind): a run's records share a handful of blocks.
_STAMPED_RUNS: dict[tuple[bytes, str, str], bytes] = {}
_STAMPED_RUNS_LIMIT = 1024


def _stamped_run_json(run_json: bytes, run_id: str, kind: RunKind) -> bytes:
    key = (run_json, run_id, kind)
    stamped = _STAMPED_RUNS.get(key)
    if stamped is None:
        if len(_STAMPED_RUNS) >= _STAMPED_RUNS_LIMIT:
            _STAMPED_RUNS.clear()
        stamped = _STAMPED_RUNS[key] = compact_json(_rekey(json.loads(run_json), run_id, kind))
    return stamped


def _split(mapping: Mapping[Any, Any], keys: tuple[str, ...]) -> list[_Piece]:
    """``mapping``'s members encoded in runs between the given keys, which stay in place as placeholders."""
    pieces: list[_Piece] = []
    chunk: dict[Any, Any] = {}
    for key, value in mapping.items():
        if key in keys:
            if chunk:
                pieces.append(compact_json(chunk)[1:-1])
                chunk = {}
            pieces.append(key)
        else:
            chunk[key] = value
    if chunk:
        pieces.append(compact_json(chunk)[1:-1])
    return pieces


def _assemble(pieces: list[_Piece], values: Mapping[str, bytes], append: str | None = None) -> bytes:
    """An object from split pieces, each placeholder key given its encoded value; ``append`` is added at the end
    when it is not among the pieces."""
    out = [piece if isinstance(piece, bytes) else _key(piece) + values[piece] for piece in pieces]
    if append is not None and not _placeholds(pieces, append):
        out.append(_key(append) + values[append])
    return b"{" + b",".join(out) + b"}"


def _placeholds(pieces: list[_Piece], key: str) -> bool:
    return any(isinstance(piece, str) and piece == key for piece in pieces)


def _key(name: str) -> bytes:
    return b'"' + name.encode() + b'":'
