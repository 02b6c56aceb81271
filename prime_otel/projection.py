"""Projections of native episodes onto the platform's legacy tables: v0 eval-sample rows
for ``POST /evaluations/{id}/samples`` and the training viewer's Parquet object.

Duck-typed against verifiers 0.4.0 episodes and traces; verifiers is never imported. An episode
may also be its JSON record (``Episode.to_record()``: a mapping with a ``traces`` key), projected to the same rows
by verifiers' rules over the plain JSON (:mod:`prime_otel.records._trace`); such rows share sub-objects with the
record.
Output equals prime-runs 0.1.4's ``prime_runs.projection`` except for these documented improvements:

1. The Parquet ``advantage`` column is null when the advantage is NaN/±inf (0.1.4 writes the raw value).
2. Rows handed to :func:`pack_sample_requests` / :func:`batch_samples` holding NaN/±inf are nullified rather
   than refused, like projected rows (0.1.4 sent pass-through rows as given, so one NaN refused the request).
3. Each row is encoded once: :func:`encode_samples` keeps the compact JSON made for the 25 MiB check and
   :func:`pack_sample_requests` returns finished request bodies, so the uploader never encodes a row again.
4. ``record=`` / ``records=`` take the record the caller already has, as a mapping or as an
   :class:`~prime_otel.records.EncodedRecord` (whose bytes the Prime Traces line shares), so ``to_record()``
   and the record's encoding each run once per episode across sinks.
5. ``episode_to_samples`` takes the rollout number or the per-example counter dict.
6. Each message object is dumped once per trace (branches share their prefix nodes) and non-finite values are
   found by the encoder instead of a recursive walk. Rows may therefore share unchanged sub-objects (message
   dicts between ``completion`` and the last ``trajectory`` branch): treat rows as read-only.
7. A trace whose ``info`` is None projects ``info: null`` instead of raising.
"""

from .exporters._parquet_rows import (
    episodes_to_parquet_bytes,
    parquet_available,
    sample_rows_to_parquet_bytes,
    train_sample_schema,
)
from .exporters._sample_rows import (
    ENVELOPE_BYTES,
    MAX_SAMPLES_PAYLOAD_BYTES,
    EncodedSample,
    PackedRequest,
    RecordInput,
    batch_samples,
    build_samples,
    encode_episode_samples,
    encode_samples,
    episode_to_samples,
    json_bytes,
    pack_sample_requests,
    summary_trace,
    summary_trace_index,
    trace_to_sample,
)

__all__ = [
    "ENVELOPE_BYTES",
    "MAX_SAMPLES_PAYLOAD_BYTES",
    "EncodedSample",
    "PackedRequest",
    "RecordInput",
    "batch_samples",
    "build_samples",
    "encode_episode_samples",
    "encode_samples",
    "episode_to_samples",
    "episodes_to_parquet_bytes",
    "json_bytes",
    "pack_sample_requests",
    "parquet_available",
    "sample_rows_to_parquet_bytes",
    "summary_trace",
    "summary_trace_index",
    "trace_to_sample",
    "train_sample_schema",
]
