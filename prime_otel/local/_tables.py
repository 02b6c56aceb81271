"""The legacy evaluation samples table (append-only) and the training metrics table (one row per step)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ._db import Database, dumps, loads
from ._errors import PlatformError


class SampleTable:
    """v0 rows, appended as received: the service does not deduplicate by ``sample_id``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def append(self, run_id: str, rows: Sequence[Mapping[str, Any]]) -> int:
        """Appends to a RUNNING evaluation; checked in the same transaction, so a concurrent finalize wins cleanly."""
        with self._db.write() as conn:
            status = conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()["status"]
            if status != "RUNNING":
                raise PlatformError(409, f"Evaluation {run_id} is {status}; it no longer accepts samples")
            conn.executemany("INSERT INTO samples (run_id, row) VALUES (?, ?)", ((run_id, dumps(r)) for r in rows))
        return len(rows)

    def count(self, run_id: str) -> int:
        with self._db.read() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM samples WHERE run_id = ?", (run_id,)).fetchone()[0])

    def page(self, run_id: str, offset: int, limit: int) -> tuple[int, list[Any]]:
        with self._db.read() as conn:
            total = int(conn.execute("SELECT COUNT(*) FROM samples WHERE run_id = ?", (run_id,)).fetchone()[0])
            rows = conn.execute(
                "SELECT row FROM samples WHERE run_id = ? ORDER BY seq LIMIT ? OFFSET ?", (run_id, limit, offset)
            ).fetchall()
        return total, [loads(row["row"]) for row in rows]


class MetricTable:
    """One row per (run, step): a repeat merges into it, later values winning per key.

    A row without a step cannot be merged with anything; it is appended, keyed by ``_timestamp``.
    """

    def __init__(self, db: Database) -> None:
        self._db = db

    def write(self, run_id: str, metrics: Mapping[str, Any], step: int | None) -> None:
        timestamp = metrics.get("_timestamp")
        if not isinstance(timestamp, (int, float)) or isinstance(timestamp, bool):
            timestamp = time.time()
        with self._db.write() as conn:
            if step is None:
                conn.execute(
                    "INSERT INTO metric_rows (run_id, step, timestamp, metrics) VALUES (?, NULL, ?, ?)",
                    (run_id, timestamp, dumps(dict(metrics))),
                )
                return
            row = conn.execute(
                "SELECT metrics FROM metric_rows WHERE run_id = ? AND step = ?", (run_id, step)
            ).fetchone()
            merged = {**(loads(row["metrics"]) if row is not None else {}), **metrics}
            conn.execute(
                "INSERT INTO metric_rows (run_id, step, timestamp, metrics) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (run_id, step) WHERE step IS NOT NULL "
                "DO UPDATE SET metrics = excluded.metrics, timestamp = excluded.timestamp",
                (run_id, step, timestamp, dumps(merged)),
            )

    def rows(self, run_id: str) -> list[Any]:
        """Stepped rows in step order, then step-less rows in timestamp order."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT metrics FROM metric_rows WHERE run_id = ? ORDER BY step IS NULL, step, timestamp, seq",
                (run_id,),
            ).fetchall()
        return [loads(row["metrics"]) for row in rows]
