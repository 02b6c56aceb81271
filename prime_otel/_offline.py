"""Offline mode: a real run on disk, synced later with ``prime-otel sync``.

Records are encoded on the calling thread and appended with one ``write`` per line on ``O_APPEND``
descriptors: nothing is buffered in the process, so a fork has nothing to duplicate, a crash loses
nothing that was logged, and concurrent processes of one run never interleave within a line.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .projection import encode_samples
from .records import EncodedRecord, UnencodableRecord, compact_json, encode_record, is_episode

RUN_FILE = "run.json"
EPISODES_FILE = "episodes.jsonl"
TRACES_FILE = "traces.jsonl"
SAMPLES_FILE = "samples.jsonl"
METRICS_FILE = "metrics.jsonl"


def offline_run_id() -> str:
    return f"offline-{secrets.token_hex(8)}"


def _append_line(path: Path, line: bytes) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, line)
    finally:
        os.close(descriptor)


def write_json_atomically(path: Path, document: Mapping[str, Any]) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(document, out, ensure_ascii=False, indent=2)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


class OfflineRunWriter:
    """Writes one offline run's folder: ``run.json`` plus append-only JSONL record files."""

    def __init__(self, folder: Path, run_id: str, kind: str) -> None:
        self.folder = folder
        self.run_id = run_id
        self.kind = kind
        self.records_written = 0
        self.bytes_written = 0
        self._rollout_numbers: dict[Any, int] = {}
        folder.mkdir(parents=True, exist_ok=True)
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
        for record, encoded in zip(batch, encodings, strict=True):
            episode = is_episode(record)
            self._append(EPISODES_FILE if episode else TRACES_FILE, encoded.stamped(self.run_id, self.kind))
            if episode and self.kind == "eval" and not isinstance(record, Mapping):
                for sample in encode_samples([record], self._rollout_numbers, records=[encoded]):
                    self._append(SAMPLES_FILE, sample.data)
            self.records_written += 1

    def write_metrics(self, row: Mapping[str, Any]) -> None:
        self._append(METRICS_FILE, compact_json(row))

    def _append(self, name: str, line: bytes) -> None:
        data = line + b"\n"
        _append_line(self.folder / name, data)
        self.bytes_written += len(data)
