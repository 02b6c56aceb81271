"""Evaluations and external training runs: their records and state machines (a closed run refuses a status write)."""

from __future__ import annotations

import secrets
import sqlite3
import string
import time
from dataclasses import dataclass
from typing import Any, Literal

from ._db import Database, dumps, iso, loads, now_iso
from ._errors import PlatformError

Kind = Literal["eval", "train"]

EVAL_TERMINAL_STATUSES = ("FAILED", "CANCELLED")
TRAIN_STATUSES = {"completed": "COMPLETED", "failed": "FAILED"}

_BASE36 = string.digits + string.ascii_lowercase


def _base36(value: int, width: int) -> str:
    digits = []
    for _ in range(width):
        value, digit = divmod(value, 36)
        digits.append(_BASE36[digit])
    return "".join(reversed(digits))


def new_run_id(kind: Kind) -> str:
    if kind == "eval":
        return f"eval-{secrets.token_hex(6)}"
    # cuid-shaped, like the platform's training run ids: time-ordered prefix, random tail.
    return "c" + _base36(int(time.time() * 1000), 9) + _base36(secrets.randbits(80), 15)


@dataclass(frozen=True)
class Run:
    seq: int
    id: str
    kind: Kind
    name: str | None
    status: str
    error_message: str | None
    created_at: str
    updated_at: str
    model: str | None
    framework: str | None
    team_id: str | None
    environments: list[Any]
    tags: list[Any]
    hosted: bool
    metadata: dict[str, Any] | None
    run_config: dict[str, Any] | None
    summary: dict[str, Any] | None
    details: dict[str, Any]

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Run:
        return cls(
            seq=row["seq"],
            id=row["id"],
            kind=row["kind"],
            name=row["name"],
            status=row["status"],
            error_message=row["error_message"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            model=row["model"],
            framework=row["framework"],
            team_id=row["team_id"],
            environments=loads(row["environments"]),
            tags=loads(row["tags"]),
            hosted=bool(row["hosted"]),
            metadata=loads(row["metadata"]),
            run_config=loads(row["run_config"]),
            summary=loads(row["summary"]),
            details=loads(row["details"]),
        )


@dataclass(frozen=True)
class NewRun:
    """What a create request carries, already validated."""

    kind: Kind
    name: str | None
    model: str | None = None
    framework: str | None = None
    team_id: str | None = None
    environments: list[Any] | None = None
    tags: list[Any] | None = None
    metadata: dict[str, Any] | None = None
    run_config: dict[str, Any] | None = None
    details: dict[str, Any] | None = None
    hosted: bool = False


class RunStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    @staticmethod
    def _settle(conn: sqlite3.Connection) -> None:
        """Completes every evaluation whose statistics task is due.

        Done lazily before each read or write of run state, so the state is the same as with a
        timer that fired exactly on time, and survives a restart for free.
        """
        conn.execute(
            "UPDATE runs SET status = 'COMPLETED', "
            "updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', completes_at, 'unixepoch'), completes_at = NULL "
            "WHERE status = 'PROCESSING' AND completes_at <= ?",
            (time.time(),),
        )

    def _load(self, conn: sqlite3.Connection, run_id: str) -> Run | None:
        row = conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else Run.from_row(row)

    def _require(self, conn: sqlite3.Connection, run_id: str, kind: Kind) -> Run:
        run = self._load(conn, run_id)
        if run is None or run.kind != kind:
            raise PlatformError(404, f"{'Evaluation' if kind == 'eval' else 'Run'} {run_id} not found")
        return run

    def create(self, new: NewRun) -> tuple[Run, str | None]:
        """Returns the run and, for a hosted run, the token it authenticates with."""
        run_id = new_run_id(new.kind)
        token = f"pit_run_{secrets.token_hex(16)}" if new.hosted else None
        now = now_iso()
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO runs (id, kind, name, status, created_at, updated_at, model, framework, team_id, "
                "environments, tags, hosted, token, metadata, run_config, details) "
                "VALUES (?, ?, ?, 'RUNNING', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    new.kind,
                    new.name,
                    now,
                    now,
                    new.model,
                    new.framework,
                    new.team_id,
                    dumps(new.environments or []),
                    dumps(new.tags or []),
                    int(new.hosted),
                    token,
                    None if new.metadata is None else dumps(new.metadata),
                    None if new.run_config is None else dumps(new.run_config),
                    dumps(new.details or {}),
                ),
            )
            run = self._load(conn, run_id)
        assert run is not None
        return run, token

    def get(self, run_id: str) -> Run | None:
        with self._db.write() as conn:
            self._settle(conn)
            return self._load(conn, run_id)

    def all(self) -> list[Run]:
        with self._db.write() as conn:
            self._settle(conn)
            rows = conn.execute("SELECT * FROM runs ORDER BY seq DESC").fetchall()
        return [Run.from_row(row) for row in rows]

    def hosted_run_for_token(self, token: str) -> str | None:
        with self._db.read() as conn:
            row = conn.execute("SELECT id FROM runs WHERE token = ? AND hosted = 1", (token,)).fetchone()
        return None if row is None else str(row["id"])

    # -- evaluations ---------------------------------------------------------

    def update_eval(self, run_id: str, metadata: dict[str, Any] | None, metrics: dict[str, Any] | None) -> Run:
        """Document-level replace of metadata and of metrics, like the service's ``$set``."""
        with self._db.write() as conn:
            self._settle(conn)
            self._require(conn, run_id, "eval")
            self._replace_documents(conn, run_id, metadata, metrics)
            run = self._load(conn, run_id)
        assert run is not None
        return run

    @staticmethod
    def _replace_documents(
        conn: sqlite3.Connection, run_id: str, metadata: dict[str, Any] | None, metrics: dict[str, Any] | None
    ) -> None:
        now = now_iso()
        if metadata is not None:
            conn.execute("UPDATE runs SET metadata = ?, updated_at = ? WHERE id = ?", (dumps(metadata), now, run_id))
        if metrics is not None:
            conn.execute("UPDATE runs SET summary = ?, updated_at = ? WHERE id = ?", (dumps(metrics), now, run_id))

    def close_eval(
        self,
        run_id: str,
        status: str,
        error_message: str | None,
        metadata: dict[str, Any] | None,
        metrics: dict[str, Any] | None,
    ) -> Run:
        with self._db.write() as conn:
            self._settle(conn)
            run = self._require(conn, run_id, "eval")
            if run.status != "RUNNING":
                raise PlatformError(409, f"Evaluation {run_id} is already {run.status}")
            self._replace_documents(conn, run_id, metadata, metrics)
            conn.execute(
                "UPDATE runs SET status = ?, error_message = ?, updated_at = ? WHERE id = ?",
                (status, error_message, now_iso(), run_id),
            )
            closed = self._load(conn, run_id)
        assert closed is not None
        return closed

    def finalize_eval(self, run_id: str, metrics: dict[str, Any] | None, processing_delay: float) -> Run:
        """RUNNING → PROCESSING; the statistics task completes it ``processing_delay`` seconds later."""
        with self._db.write() as conn:
            self._settle(conn)
            run = self._require(conn, run_id, "eval")
            if run.status != "RUNNING":
                raise PlatformError(409, f"Evaluation {run_id} is already {run.status}")
            if metrics:
                self._replace_documents(conn, run_id, None, metrics)
            now = time.time()
            conn.execute(
                "UPDATE runs SET status = 'PROCESSING', completes_at = ?, updated_at = ? WHERE id = ?",
                (now + processing_delay, iso(now), run_id),
            )
            finalized = self._load(conn, run_id)
        assert finalized is not None
        return finalized

    # -- external training runs ----------------------------------------------

    def set_train_status(self, run_id: str, status: str, error_message: str | None) -> Run:
        with self._db.write() as conn:
            run = self._require(conn, run_id, "train")
            if run.status != "RUNNING":
                raise PlatformError(409, f"Run {run_id} is already {run.status}")
            conn.execute(
                "UPDATE runs SET status = ?, error_message = ?, updated_at = ? WHERE id = ?",
                (TRAIN_STATUSES[status], error_message, now_iso(), run_id),
            )
            updated = self._load(conn, run_id)
        assert updated is not None
        return updated

    def finalize_train(self, run_id: str, exit_code: int) -> str:
        """Compare-and-set RUNNING → COMPLETED; a replay on a completed run is a success."""
        with self._db.write() as conn:
            run = self._require(conn, run_id, "train")
            if run.status == "COMPLETED":
                return "Run already finalized"
            if run.status != "RUNNING":
                raise PlatformError(409, f"Run {run_id} is {run.status}; it cannot be finalized")
            status, message = ("COMPLETED", None) if exit_code == 0 else ("FAILED", f"exit code {exit_code}")
            conn.execute(
                "UPDATE runs SET status = ?, error_message = ?, updated_at = ? WHERE id = ?",
                (status, message, now_iso(), run_id),
            )
        return "Run finalized successfully"
