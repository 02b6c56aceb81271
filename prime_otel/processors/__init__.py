"""Span processors: the bounded, counting, per-sink uploader behind every run."""

from __future__ import annotations

from ._lifecycle import RunLifecycleProcessor
from ._metrics import StepMetricsUploader
from ._record_processor import RecordProcessor
from ._slot import STRIKES_TO_RETIRE, TRAINING_PAUSE_SECONDS, SinkSlot
from ._spans import EPISODE_SPAN, TRACE_SPAN, RecordSpan, record_of
from ._uploader import Uploader

__all__ = [
    "EPISODE_SPAN",
    "STRIKES_TO_RETIRE",
    "TRACE_SPAN",
    "TRAINING_PAUSE_SECONDS",
    "RecordProcessor",
    "RecordSpan",
    "RunLifecycleProcessor",
    "SinkSlot",
    "StepMetricsUploader",
    "Uploader",
    "record_of",
]
