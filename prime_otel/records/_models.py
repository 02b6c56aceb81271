"""verifiers episodes and traces encoded to JSON by pydantic's own serializer, without ``to_record()``'s dict.

``Episode.to_record()`` builds a dict through pydantic that every sink then encodes again, and its three
computed token counts rebuild each trace's branches (pydantic models) about six times per episode. Here each
model is dumped by pydantic-core straight to JSON bytes with its computed fields left out, the token counts are
worked out once per trace by :class:`TokenCounts`, and the pieces are joined the way
:class:`~prime_otel.records.EncodedRecord` joins them.

The bytes parse to exactly what ``to_record()`` returns with NaN/±inf as null (the form every sink uploads);
only number spelling can differ (pydantic writes ``4e-05`` as ``0.00004``, the same number). A model class is
encoded here only when its computed fields are the ones this module knows; the first record of each class is
checked against ``to_record()``, and a class whose record differs, or whose encoding raises, uses ``to_record()``
for the rest of the process.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic import BaseModel

from ._encoding import (
    RUN_KEY,
    TRACES_KEY,
    EncodedMember,
    EncodedRecord,
    UnencodableRecord,
    nullify,
    to_mapping,
    why_unencodable,
)

_logger = logging.getLogger(__name__)

TOKEN_FIELDS = ("num_input_tokens", "num_output_tokens", "num_total_tokens")


@dataclass(frozen=True)
class TokenCounts:
    """A trace's computed token counts, as verifiers defines them: per root-to-leaf branch of the message
    graph, a call's new input is its input beyond the previous call's total on that branch (never negative),
    counted once per call; output is every branch's completion tokens; total is the new input plus every
    call's completion tokens once."""

    input: int
    output: int
    total: int

    @classmethod
    def of_trace(cls, trace: Any) -> TokenCounts:
        usage_at = {
            call.node: (call.usage.input_tokens, call.usage.total_tokens, call.usage.completion_tokens)
            for call in trace.calls
            if call.node is not None and call.usage is not None
        }
        completions = [call.usage.completion_tokens for call in trace.calls if call.usage is not None]
        return cls.of_graph([node.parent for node in trace.nodes], usage_at, completions)

    @classmethod
    def of_graph(
        cls,
        parents: Sequence[int | None],
        usage_at: Mapping[int, tuple[int, int, int]],
        completions: Iterable[int],
    ) -> TokenCounts:
        """The counts of a message graph given as each node's parent, the usage of the call at a node as
        (input tokens, total tokens, completion tokens), and every call's completion tokens."""
        has_child = {parent for parent in parents if parent is not None}
        counted: set[int] = set()
        new_input = output = 0
        for leaf in range(len(parents)):
            if leaf in has_child:
                continue
            path: list[int] = []
            node: int | None = leaf
            while node is not None:
                path.append(node)
                node = parents[node]
            previous_total = 0
            for node in reversed(path):
                usage = usage_at.get(node)
                if usage is None:
                    continue
                input_tokens, total_tokens, completion_tokens = usage
                if node not in counted:
                    counted.add(node)
                    new_input += max(0, input_tokens - previous_total)
                previous_total = total_tokens
                output += completion_tokens
        return cls(new_input, output, new_input + sum(completions))

    @classmethod
    def total_of(cls, counts: list[TokenCounts]) -> TokenCounts:
        return cls(sum(c.input for c in counts), sum(c.output for c in counts), sum(c.total for c in counts))

    def json_members(self) -> bytes:
        """``"num_input_tokens":…,"num_output_tokens":…,"num_total_tokens":…``, as pydantic appends them."""
        return b'"num_input_tokens":%d,"num_output_tokens":%d,"num_total_tokens":%d' % (
            self.input,
            self.output,
            self.total,
        )


class _VerifiersShapes:
    """What ``to_record()`` passes to ``model_dump`` in the verifiers release the producer imported."""

    def __init__(self) -> None:
        episode_module = sys.modules["verifiers.v1.episode"]
        trace_module = sys.modules["verifiers.v1.trace"]
        graph_module = sys.modules["verifiers.v1.graph"]
        self.episode_type: type = episode_module.Episode
        self.trace_type: type = trace_module.Trace
        self.trace_exclude: Any = trace_module.EXCLUDE_FIELDS
        self.context = {"float_decimals": graph_module.RECORD_FLOAT_DECIMALS}

    @classmethod
    def load(cls) -> _VerifiersShapes | None:
        try:
            return cls()
        except (KeyError, AttributeError):
            return None


def _dump(model: Any, **options: Any) -> bytes:
    """pydantic's JSON of ``model`` without its computed fields, as bytes (``model_dump_json`` decodes to str)."""
    data: bytes = type(model).__pydantic_serializer__.to_json(model, exclude_computed_fields=True, **options)
    return data


_Encoding = Callable[[Any, _VerifiersShapes], EncodedRecord]


class ModelRecordEncoder:
    """Encodes verifiers ``Episode`` and ``Trace`` objects; :meth:`encode` answers None for anything else."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._shapes: _VerifiersShapes | None = None
        self._trusted: dict[type, bool] = {}

    def encode(self, record: Any) -> EncodedRecord | None:
        """The record's encoding, or None when it is not a model this encoder handles (or one it stopped
        trusting): the caller then goes through ``to_record()``. When the fast path raises, the record goes through
        ``to_record()`` here: a class is distrusted only if that works, so one bad record (a lone surrogate, a cycle)
        raises :class:`UnencodableRecord` and leaves its class on the fast path."""
        if not isinstance(record, BaseModel) or "verifiers.v1.episode" not in sys.modules:
            return None
        shapes = self._shapes or self._load_shapes()
        cls = type(record)
        trusted = self._trusted.get(cls)
        if shapes is None or trusted is False:
            return None
        encode = self._encoding_for(cls, shapes)
        if encode is None:
            return None
        try:
            encoded = encode(record, shapes)
        except Exception as error:
            through_to_record(record)  # raises for a record that is bad either way: its class stays trusted
            self._distrust(cls, f"raised {error!r}")
            return None
        if trusted is None:
            if json.loads(encoded.plain) != nullify(cast(Any, record).to_record()):
                self._distrust(cls, "encodes differently from to_record()")
                return None
            self._trusted[cls] = True
        return encoded

    def _encoding_for(self, cls: type[BaseModel], shapes: _VerifiersShapes) -> _Encoding | None:
        for base, encoding in ((shapes.episode_type, self._episode), (shapes.trace_type, self._trace)):
            if issubclass(cls, base):
                if getattr(cls, "to_record", None) is not getattr(base, "to_record", None):
                    self._distrust(cls, "overrides to_record()")
                    return None
                if tuple(cls.model_computed_fields) != TOKEN_FIELDS:
                    self._distrust(cls, "has computed fields this encoder does not know")
                    return None
                return encoding
        return None

    def _load_shapes(self) -> _VerifiersShapes | None:
        with self._lock:
            if self._shapes is None:
                self._shapes = _VerifiersShapes.load()
            return self._shapes

    def _distrust(self, cls: type, reason: str) -> None:
        self._trusted[cls] = False
        _logger.debug("%s %s; its records go through to_record()", cls.__name__, reason)

    def _episode(self, episode: Any, shapes: _VerifiersShapes) -> EncodedRecord:
        members: list[EncodedMember] = []
        counts: list[TokenCounts] = []
        for trace in episode.traces:
            trace_counts = TokenCounts.of_trace(trace)
            counts.append(trace_counts)
            members.append(EncodedMember.from_json(self._trace_json(trace, trace_counts, shapes, exclude_none=True)))
        pieces: list[bytes | str] = []
        segment: set[str] = set()
        for name in type(episode).model_fields:
            if name in (RUN_KEY, TRACES_KEY):
                self._add_segment(pieces, episode, segment, shapes)
                segment = set()
                if name == TRACES_KEY or getattr(episode, name) is not None:
                    pieces.append(name)
            else:
                segment.add(name)
        self._add_segment(pieces, episode, segment, shapes)
        pieces.append(TokenCounts.total_of(counts).json_members())
        run = episode.run
        run_json = b"null" if run is None else _dump(run, exclude_none=True)
        return EncodedRecord.from_parts(pieces, run_json, members)

    @staticmethod
    def _add_segment(pieces: list[bytes | str], episode: Any, segment: set[str], shapes: _VerifiersShapes) -> None:
        """Consecutive fields of the envelope, dumped in one call (``include`` keeps the declared order)."""
        if not segment:
            return
        body = _dump(episode, include=segment, exclude_none=True, context=shapes.context)
        if body != b"{}":
            pieces.append(body[1:-1])

    def _trace(self, trace: Any, shapes: _VerifiersShapes) -> EncodedRecord:
        body = self._trace_json(trace, TokenCounts.of_trace(trace), shapes, exclude_none=False)
        return EncodedRecord.from_parts([body[1:-1]], b"null", [])

    @staticmethod
    def _trace_json(trace: Any, counts: TokenCounts, shapes: _VerifiersShapes, *, exclude_none: bool) -> bytes:
        body = _dump(trace, exclude=shapes.trace_exclude, exclude_none=exclude_none, context=shapes.context)
        separator = b"," if body != b"{}" else b""
        return body[:-1] + separator + counts.json_members() + b"}"


_MODEL_RECORDS = ModelRecordEncoder()


def through_to_record(record: Any) -> EncodedRecord:
    """The record encoded from its ``to_record()`` mapping; :class:`UnencodableRecord` when that fails."""
    try:
        mapping = to_mapping(record)
    except (RecursionError, UnicodeError) as error:
        raise UnencodableRecord(why_unencodable(error)) from error
    except Exception as error:
        raise UnencodableRecord(f"to_record() raised {type(error).__name__}") from error
    return EncodedRecord(mapping)


def encode_record(record: Any) -> EncodedRecord:
    """A producer's record (a mapping, a verifiers object or anything with ``to_record()``) encoded once;
    :class:`~prime_otel.records.UnencodableRecord` (with a short reason) when it cannot be."""
    if isinstance(record, Mapping):
        return EncodedRecord(record)
    return _MODEL_RECORDS.encode(record) or through_to_record(record)
