"""What a record is and how it is encoded: the ground floor every sink, processor and facade stands on.

Recognising episodes and traces, their JSON encoding (pydantic's serializer for verifiers models, one
encoding shared by every sink), the two non-finite policies (null in records, dropped in metrics and
summaries), the value policy of a metrics row, a metrics collection as step rows, a record's fields read alike
from an object or a mapping (its dispatch step), and the finished ``episode``/``trace`` spans that carry a
producer's record to the exporters.
"""

from __future__ import annotations

from ._encoding import (
    EncodedRecord,
    UnencodableRecord,
    clean,
    compact_json,
    is_episode,
    loggable,
    nullify,
    stamp_run,
    to_mapping,
    why_unencodable,
)
from ._fields import field_of, impossible_training_step, training_step, work_step
from ._metric_values import MAX_STEP, histogram_value, metric_row, point_value, step_number
from ._models import encode_record
from ._received import decode_received
from ._spans import (
    RECORD_SPAN_NAMES,
    PlainRecordSpan,
    RecordSpan,
    child_summary,
    record_from_attributes,
    record_kind,
    record_of,
)
from ._step_rows import ALL_DELTA, StepRowExporter

__all__ = [
    "ALL_DELTA",
    "MAX_STEP",
    "RECORD_SPAN_NAMES",
    "EncodedRecord",
    "PlainRecordSpan",
    "RecordSpan",
    "StepRowExporter",
    "UnencodableRecord",
    "child_summary",
    "clean",
    "compact_json",
    "decode_received",
    "encode_record",
    "field_of",
    "histogram_value",
    "impossible_training_step",
    "is_episode",
    "loggable",
    "metric_row",
    "nullify",
    "point_value",
    "record_from_attributes",
    "record_kind",
    "record_of",
    "stamp_run",
    "step_number",
    "to_mapping",
    "training_step",
    "why_unencodable",
    "work_step",
]
