"""One SQLite file in WAL mode; one connection per thread, writes serialised by ``BEGIN IMMEDIATE``."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS environments (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (owner, name)
);
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    name TEXT,
    status TEXT NOT NULL,
    error_message TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    model TEXT,
    framework TEXT,
    team_id TEXT,
    environments TEXT NOT NULL,
    tags TEXT NOT NULL,
    hosted INTEGER NOT NULL DEFAULT 0,
    token TEXT UNIQUE,
    metadata TEXT,
    run_config TEXT,
    summary TEXT,
    details TEXT NOT NULL,
    completes_at REAL
);
CREATE INDEX IF NOT EXISTS runs_status ON runs (status);
CREATE TABLE IF NOT EXISTS samples (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    row TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS samples_run ON samples (run_id, seq);
CREATE TABLE IF NOT EXISTS metric_rows (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    step INTEGER,
    timestamp REAL,
    metrics TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS metric_rows_step ON metric_rows (run_id, step) WHERE step IS NOT NULL;
CREATE TABLE IF NOT EXISTS objects (
    key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    uploaded_at TEXT,
    bytes INTEGER,
    rows INTEGER,
    confirmed_at TEXT,
    superseded_at TEXT
);
CREATE INDEX IF NOT EXISTS objects_run ON objects (run_id, step);
CREATE TABLE IF NOT EXISTS uploads (
    digest TEXT PRIMARY KEY,
    line_format TEXT NOT NULL,
    team_id TEXT,
    metadata TEXT NOT NULL,
    num_lines INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS episodes (
    seq INTEGER NOT NULL,
    id TEXT PRIMARY KEY,
    upload_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    team_id TEXT,
    created_at TEXT NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS episodes_run ON episodes (run_id, seq);
CREATE TABLE IF NOT EXISTS traces (
    seq INTEGER NOT NULL,
    id TEXT PRIMARY KEY,
    upload_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    episode_id TEXT,
    position INTEGER NOT NULL,
    environment_id TEXT NOT NULL,
    team_id TEXT,
    step INTEGER,
    reward REAL,
    created_at TEXT NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS traces_run ON traces (run_id, seq);
CREATE INDEX IF NOT EXISTS traces_episode ON traces (episode_id, position);
CREATE INDEX IF NOT EXISTS traces_upload ON traces (upload_id);
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS request_runs (
    request_seq INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    route_key TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS request_runs_run ON request_runs (run_id, request_seq);
"""


class Database:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._local = threading.local()
        _make_private(path)
        self._connection().executescript(_SCHEMA)

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self._path, isolation_level=None, timeout=30.0, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
        return conn

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A snapshot: every query inside sees the same committed state."""
        conn = self._connection()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @staticmethod
    def next_values(conn: sqlite3.Connection, counter: str, count: int = 1) -> int:
        """Reserve ``count`` consecutive values of a named counter; returns the first."""
        row = conn.execute(
            "INSERT INTO counters (name, value) VALUES (?, ?) "
            "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value RETURNING value",
            (counter, count),
        ).fetchone()
        return int(row[0]) - count + 1


def _make_private(path: Path) -> None:
    """The database holds run tokens: the file is the owner's alone (0600). SQLite creates its ``-wal`` and
    ``-shm`` files with the database file's mode, so they follow; ones left by an earlier start are fixed too."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    for companion in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if companion.exists():
            companion.chmod(0o600)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise json.JSONDecodeError(f"{text} does not fit a finite number", text, 0)
    return value


def _refuse_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not JSON", name, 0)


#: SQLite's integers are signed 64-bit: larger ones in a query or a column are refused before they reach it.
INT64_MAX = 2**63 - 1


def parse_json(data: str | bytes) -> Any:
    """Strict JSON: no ``NaN``/``Infinity``, no number that overflows to infinity (``1e999``), and no string
    holding a lone surrogate (``"\\ud800"`` is valid JSON text but no UTF-8 column or response can hold it).

    Whatever is accepted can be stored and served again as standard JSON.
    """
    value = json.loads(data, parse_constant=_refuse_constant, parse_float=_finite)
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise json.JSONDecodeError("a string holds a lone surrogate", "", 0) from None
    return value


def _finite_or_text(text: str) -> float | str:
    value = float(text)
    return value if math.isfinite(value) else text


def parse_json_leniently(data: str | bytes) -> Any:
    """For recordings of what was sent: non-standard numbers are kept as their text."""
    return json.loads(data, parse_constant=str, parse_float=_finite_or_text)


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def storable(text: str) -> str:
    """``text`` with lone surrogates (which no UTF-8 column or response can hold) replaced by ``?``."""
    return text.encode("utf-8", "replace").decode("utf-8")


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def iso(epoch: float) -> str:
    moment = datetime.fromtimestamp(epoch, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def now_iso() -> str:
    return iso(time.time())
