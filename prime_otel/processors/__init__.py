"""Span processors: the bounded, counting, per-sink uploader behind every run."""

from __future__ import annotations

from ._lifecycle import RunLifecycleProcessor
from ._metrics import StepMetricsUploader
from ._record_processor import RecordProcessor
from ._slot import STRIKES_TO_RETIRE, TRAINING_PAUSE_SECONDS, SinkSlot
from ._uploader import Uploader

__all__ = [
    "STRIKES_TO_RETIRE",
    "TRAINING_PAUSE_SECONDS",
    "RecordProcessor",
    "RunLifecycleProcessor",
    "SinkSlot",
    "StepMetricsUploader",
    "Uploader",
]
