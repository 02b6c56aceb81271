"""Record spans of an offline run (zero-code, or a tracer of the run's provider) into its run folder.

An ``episode``/``trace`` span's record (``prime.record.json`` or ``prime.record``) is appended to the folder's
record files, with the episode's child spans attached under ``otel_spans`` as the online path does, so
``prime-otel sync`` later delivers it like a record given to ``run.log_episodes``.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from .._conventions import CHILD_SPANS, EPISODE_SPAN
from .._fork import register_for_fork_reset
from ..offline._writer import OfflineRunWriter
from ..records import RECORD_SPAN_NAMES, child_summary, record_from_attributes

_logger = logging.getLogger("prime_otel")


class OfflineRecordSpans(SpanProcessor):
    def __init__(self, writer: OfflineRunWriter) -> None:
        self._writer = writer
        self._children: dict[int, list[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        register_for_fork_reset(self)

    def reset_after_fork(self) -> None:
        """A forked child starts with no open episode spans and a lock nobody holds."""
        self._children = {}
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if span.name in RECORD_SPAN_NAMES:
            with self._lock:
                self._children[span.context.span_id] = []

    def on_end(self, span: ReadableSpan) -> None:
        if span.name not in RECORD_SPAN_NAMES:
            parent = span.parent
            with self._lock:
                siblings = self._children.get(parent.span_id) if parent is not None else None
                if siblings is not None:
                    siblings.append(child_summary(span))
            return
        with self._lock:
            children = self._children.pop(span.context.span_id, [])
        record = record_from_attributes(span.attributes or {})
        if record is None:
            _logger.warning("an %r span without a record attribute reaches no sink", span.name)
            return
        if children:
            record = {**record, CHILD_SPANS: [*record.get(CHILD_SPANS, []), *children]}
        operation = "log_episodes" if span.name == EPISODE_SPAN else "log_traces"
        try:
            self._writer.write_records(operation, [record])
        except ValueError as error:
            self._writer.failed += 1
            _logger.warning("a %s span's record is not written to the run folder: %s", span.name, error)
