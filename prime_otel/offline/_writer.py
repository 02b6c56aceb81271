"""Offline mode: a real run on disk, synced later with ``prime-otel sync``.

Records are encoded on the calling thread and appended with one ``write`` per line on ``O_APPEND``
descriptors: nothing is buffered in the process, so a fork has nothing to duplicate, a crash loses
nothing that was logged, and concurrent processes of one run never interleave within a line.

A folder that cannot be written any more (a full disk) stops the writer: the record being written and every
later one are counted as failed with the reason, and the producer's calls go on without raising.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import secrets
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .._files import write_json_atomically
from .._types import RunKind
from ..projection import encode_samples
from ..records import EncodedRecord, UnencodableRecord, compact_json, encode_record, is_episode
from ._lock import FolderLock

RUN_FILE = "run.json"
EPISODES_FILE = "episodes.jsonl"
TRACES_FILE = "traces.jsonl"
SAMPLES_FILE = "samples.jsonl"
METRICS_FILE = "metrics.jsonl"

_logger = logging.getLogger("prime_otel")


def offline_run_id() -> str:
    return f"offline-{secrets.token_hex(8)}"


def _append_line(path: Path, line: bytes) -> None:
    """Append ``line`` in full. A write that fails part way is cut back off when nothing was appended after it
    (a sync would otherwise read the torn line as an unreadable one)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size_before = os.fstat(descriptor).st_size
        written = 0
        try:
            while written < len(line):
                written += os.write(descriptor, line[written:])
        except OSError:
            if written:
                _cut_back(descriptor, size_before, written, path)
            raise
    finally:
        os.close(descriptor)


def _cut_back(descriptor: int, size_before: int, written: int, path: Path) -> None:
    try:
        if os.fstat(descriptor).st_size == size_before + written:
            os.ftruncate(descriptor, size_before)
            return
    except OSError:
        pass
    _logger.warning("a torn line is left at the end of %s (a sync skips it as unreadable)", path)


class OfflineRunWriter:
    """Writes one offline run's folder: ``run.json`` plus append-only JSONL record files."""

    def __init__(self, folder: Path, run_id: str, kind: RunKind) -> None:
        self.folder = folder
        self.run_id = run_id
        self.kind = kind
        self.records_written = 0
        self.bytes_written = 0
        #: Records (and metric rows) not written because the folder could not be written any more.
        self.failed = 0
        #: Why the writer stopped writing (e.g. ``disk full: <path>``); None while it writes.
        self.stopped_because: str | None = None
        self._rollout_numbers: dict[Any, int] = {}
        folder.mkdir(parents=True, exist_ok=True)
        # Held (shared with the run's other processes) while this process may write: no sync reads a folder
        # that is still being written.
        self._lock = FolderLock(folder, role="producer")
        if not self._lock.acquire(exclusive=False):
            _logger.warning("a prime-otel sync is delivering %s while this process writes it", folder)
        existing = folder / RUN_FILE
        self._document: dict[str, Any] = json.loads(existing.read_text(encoding="utf-8")) if existing.exists() else {}

    def write_run_document(self, changes: Mapping[str, Any]) -> None:
        """Merge ``changes`` into ``run.json`` (rewritten atomically, so a reader never sees half a document)."""
        self._document.update(changes)
        self._document["updated_at"] = time.time()
        write_json_atomically(self.folder / RUN_FILE, self._document)

    def write_records(self, operation: str, records: Iterable[Any]) -> None:
        """Append the records; one that cannot be encoded raises (naming its position) before any is written."""
        batch = list(records)
        encodings: list[EncodedRecord] = []
        for position, record in enumerate(batch):
            try:
                encodings.append(encode_record(record))
            except UnencodableRecord as error:
                raise ValueError(
                    f"{operation}(): record {position} cannot be encoded ({error.reason}); nothing of this call was "
                    "written"
                ) from error
        for position, (record, encoded) in enumerate(zip(batch, encodings, strict=True)):
            if self.stopped_because is not None:
                self.failed += len(batch) - position
                return
            try:
                self._write_record(record, encoded)
            except OSError:
                # Lines of the record written before the failure stay: a sync delivers them, the record counts failed.
                self.failed += len(batch) - position
                return
            self.records_written += 1

    def _write_record(self, record: Any, encoded: EncodedRecord) -> None:
        episode = is_episode(record)
        self._append(EPISODES_FILE if episode else TRACES_FILE, encoded.stamped(self.run_id, self.kind))
        if episode and self.kind == "eval":
            for sample in encode_samples([record], self._rollout_numbers, records=[encoded]):
                self._append(SAMPLES_FILE, sample.data)

    def write_metrics(self, row: Mapping[str, Any]) -> None:
        if self.stopped_because is not None:
            self.failed += 1
            return
        try:
            self._append(METRICS_FILE, compact_json(row))
        except OSError:
            self.failed += 1

    def close(self) -> None:
        """This process writes no more: a sync may take the folder once every process of the run closed."""
        self._lock.release()

    @property
    def failure_reasons(self) -> dict[str, int]:
        return {self.stopped_because: self.failed} if self.failed and self.stopped_because else {}

    def _append(self, name: str, line: bytes) -> None:
        data = line + b"\n"
        path = self.folder / name
        try:
            _append_line(path, data)
        except OSError as error:
            self._stop(path, error)
            raise
        self.bytes_written += len(data)

    def _stop(self, path: Path, error: OSError) -> None:
        if self.stopped_because is not None:
            return
        full = error.errno in (errno.ENOSPC, errno.EDQUOT)
        self.stopped_because = f"disk full: {path}" if full else f"not writable: {path} ({error.strerror or error})"
        _logger.warning(
            "the offline run folder %s cannot be written (%s): what is logged from now on is counted as failed",
            self.folder,
            error,
        )
