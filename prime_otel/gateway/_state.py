"""The gateway's durable state under ``--state-dir``: what a restarted gateway needs to end each run with every
record once and its true status.

- ``gateway-state.sqlite3`` (WAL, mode 0600): per run its kind, sender and resource, world size and ranks,
  arrivals per rank and kind, end markers, the span ids and step-row keys already taken (dedupe), the
  duplicates, foreign and invalid records counted on arrival, and whether it closed (late data for a closed run
  stays refused after a restart).
- ``runs/<sha256 of the run id>/spool/``: the records taken but not yet delivered, in the SDK's own spool
  (``processors.RunSpool``, one pseudo-sink ``gateway``): appended before the request is acknowledged, settled
  once delivered, replayed after a restart. GenAI spans awaiting assembly are logged there too (kind
  ``genai_span``, with their span id: one whose id the database does not hold was never acknowledged), settled in
  the write that counts the episodes assembled from them (each episode logged with the seqs of its spans, so an
  episode logged but not counted is dropped and its spans assembled again), or when their trace is given up.
- Per delivered batch, in one transaction: its spool seqs (settled: never replayed, whatever the spool's ledger
  says) and a snapshot of the per-sink counts of the uploader that delivered it (delivered, failed with reasons,
  skipped, requests, bytes, episodes Prime Traces wrote). Records replayed after a restart are exactly those of
  no snapshot, so the counts restored plus the replay's are the run's true totals.
- Per record and non-idempotent sink (the eval sample table, the training step objects), the intent of the
  request that carries it, written before that request leaves: ``sending`` (the sample keys and rollout number,
  or the step and object key), then ``delivered``, ``failed`` (with why) or ``released`` (certainly not stored),
  and the counters that number them (rollouts per example, sample id ranges per step). A record replayed after a
  restart is settled from its intent: delivered or failed ones are counted, not sent; one whose request was in
  flight is read back (sample rows) or confirmed again (its step object's key) and sent only when proven absent.

Every write happens before the sender is answered (or the request leaves), so what a sender saw acknowledged
survives a SIGKILL of the gateway; what it did not see is sent again and deduplicated by span id.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._types import RunStatus
from ..processors._spool import RunSpool
from ._defaults import DEFAULT_RUN_SPOOL_BYTES
from ._ending import EPISODES, EndMarker

SPOOL_SINK = "gateway"
_DATABASE = "gateway-state.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    sender TEXT NOT NULL,
    resource TEXT NOT NULL,
    world_size INTEGER NOT NULL DEFAULT 1,
    ranks TEXT NOT NULL DEFAULT '[]',
    closed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS arrivals (
    run_id TEXT NOT NULL,
    rank INTEGER NOT NULL,
    kind TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (run_id, rank, kind)
);
CREATE TABLE IF NOT EXISTS markers (
    run_id TEXT NOT NULL,
    rank INTEGER NOT NULL,
    marker TEXT NOT NULL,
    PRIMARY KEY (run_id, rank)
);
CREATE TABLE IF NOT EXISTS seen_spans (
    run_id TEXT NOT NULL,
    span_id BLOB NOT NULL,
    PRIMARY KEY (run_id, span_id)
);
CREATE TABLE IF NOT EXISTS seen_rows (
    run_id TEXT NOT NULL,
    rank INTEGER NOT NULL,
    step INTEGER,
    time_ns INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS seen_rows_run ON seen_rows (run_id);
CREATE TABLE IF NOT EXISTS settled (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS sink_counts (
    run_id TEXT NOT NULL,
    uploader TEXT NOT NULL,
    counts TEXT NOT NULL,
    PRIMARY KEY (run_id, uploader)
);
CREATE TABLE IF NOT EXISTS intents (
    run_id TEXT NOT NULL,
    sink TEXT NOT NULL,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL,
    detail TEXT NOT NULL,
    at REAL NOT NULL,
    PRIMARY KEY (run_id, sink, seq)
);
CREATE INDEX IF NOT EXISTS intents_seq ON intents (run_id, seq);
CREATE TABLE IF NOT EXISTS counters (
    run_id TEXT NOT NULL,
    sink TEXT NOT NULL,
    key TEXT NOT NULL,
    value INTEGER NOT NULL,
    PRIMARY KEY (run_id, sink, key)
);
"""

#: A request that may store the record is under way (or was, when the gateway died).
SENDING = "sending"
#: The sink stored the record.
DELIVERED = "delivered"
#: The sink will never store it (refused, or possibly stored and not provable): counted failed with ``reason``.
FAILED = "failed"
#: Certainly not stored: a replay sends it again (with the rollout number it had).
RELEASED = "released"
_RUN_TABLES = ("arrivals", "markers", "seen_spans", "seen_rows", "settled", "sink_counts", "intents", "counters")


@dataclass(frozen=True)
class Intent:
    """What became of one record on one non-idempotent sink, as far as the gateway knows (see the states above).
    ``detail`` is the sink's own (sample keys and rollout number, or step and object key); ``at`` the wall time
    of the last change (for ``sending``: when the request went out)."""

    state: str
    detail: Mapping[str, Any]
    at: float


@dataclass
class StoredRun:
    run_id: str
    kind: str
    sender: str
    resource: dict[str, Any]
    world_size: int
    ranks: list[int]
    closed: bool
    received: dict[int, dict[str, int]] = field(default_factory=dict)
    markers: list[EndMarker] = field(default_factory=list)
    seen_spans: set[bytes] = field(default_factory=set)
    seen_rows: set[tuple[int, int | None, int]] = field(default_factory=set)
    #: Spool seqs whose delivery is over (never replayed).
    settled: set[int] = field(default_factory=set)
    #: Per uploader (``records``, ``metrics``), its sinks' counts as of its last delivered batch; ``arrivals``: the
    #: duplicates, foreign and invalid records counted on arrival.
    counts: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Per non-idempotent sink, the intent of each record it was given.
    intents: dict[str, dict[int, Intent]] = field(default_factory=dict)
    #: Per non-idempotent sink, its numbering counters.
    counters: dict[str, dict[str, int]] = field(default_factory=dict)


class GatewayState:
    """One gateway's state folder; thread-safe (one SQLite connection per thread, writes serialised)."""

    def __init__(self, folder: Path, spool_max_bytes: int = DEFAULT_RUN_SPOOL_BYTES) -> None:
        self.folder = folder
        self._spool_max_bytes = spool_max_bytes
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        self._path = folder / _DATABASE
        os.close(os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600))
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._connection().executescript(_SCHEMA)

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self._path, isolation_level=None, timeout=30.0, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._connection()
        with self._write_lock:
            conn.execute("BEGIN IMMEDIATE")
            done = False
            try:
                yield conn
                done = True
            finally:
                conn.execute("COMMIT" if done else "ROLLBACK")

    # -- writes, each before the sender is answered ------------------------------------------------

    def opened(self, run_id: str, kind: str, sender: str, resource: Mapping[str, Any]) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO runs (run_id, kind, sender, resource) VALUES (?, ?, ?, ?)",
                (run_id, kind, sender, json.dumps(dict(resource), default=str)),
            )

    def touched(self, run_id: str, world_size: int, ranks: Sequence[int]) -> None:
        with self._write() as conn:
            conn.execute(
                "UPDATE runs SET world_size = ?, ranks = ? WHERE run_id = ?",
                (world_size, json.dumps(sorted(ranks)), run_id),
            )

    def arrived(self, run_id: str, rank: int, kind: str, span_ids: Sequence[bytes], count: int | None = None) -> None:
        """``count`` records arrived (default: one per span id, each remembered)."""
        with self._write() as conn:
            _remember(conn, run_id, span_ids)
            _count_arrivals(conn, run_id, [(rank, kind, len(span_ids) if count is None else count)])

    def not_arrived(self, run_id: str, rank: int, kind: str, span_ids: Sequence[bytes]) -> None:
        """Undo :meth:`arrived` for records that could not be queued after all (their sender sends them again)."""
        with self._write() as conn:
            conn.executemany(
                "DELETE FROM seen_spans WHERE run_id = ? AND span_id = ?", [(run_id, span_id) for span_id in span_ids]
            )
            conn.execute(
                "UPDATE arrivals SET count = count - ? WHERE run_id = ? AND rank = ? AND kind = ?",
                (len(span_ids), run_id, rank, kind),
            )

    def rows_arrived(self, run_id: str, rank: int, keys: Sequence[tuple[int | None, int]], kind: str) -> None:
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO seen_rows (run_id, rank, step, time_ns) VALUES (?, ?, ?, ?)",
                [(run_id, rank, step, time_ns) for step, time_ns in keys],
            )
            _count_arrivals(conn, run_id, [(rank, kind, len(keys))])

    def remembered(self, run_id: str, span_ids: Sequence[bytes]) -> None:
        """Spans taken that count as no arrival yet (GenAI spans awaiting assembly): only their ids are kept."""
        with self._write() as conn:
            _remember(conn, run_id, span_ids)

    def assembled(self, run_id: str, episodes: Mapping[int, int], consumed: Sequence[int]) -> None:
        """Episodes assembled from GenAI spans (per rank, how many) arrived, and the spool seqs of the spans they were
        assembled from are settled, in one write: a restart either replays the episodes logged in their stead or
        assembles the spans again, never both."""
        with self._write() as conn:
            _count_arrivals(conn, run_id, [(rank, EPISODES, count) for rank, count in episodes.items()])
            conn.executemany(
                "INSERT OR IGNORE INTO settled (run_id, seq) VALUES (?, ?)", [(run_id, seq) for seq in consumed]
            )

    def marked(self, run_id: str, span_id: bytes, marker: EndMarker) -> None:
        with self._write() as conn:
            _remember(conn, run_id, [span_id])
            conn.execute(
                "INSERT OR REPLACE INTO markers (run_id, rank, marker) VALUES (?, ?, ?)",
                (run_id, marker.rank, json.dumps(_marker_to_dict(marker))),
            )

    def intended(
        self, run_id: str, sink: str, intents: Mapping[int, Intent], counters: Mapping[str, int] | None = None
    ) -> None:
        """Record what became of records on ``sink`` (a ``sending`` one before its request leaves), and raise its
        numbering counters to at least ``counters``."""
        with self._write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO intents (run_id, sink, seq, state, detail, at) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (run_id, sink, seq, intent.state, json.dumps(dict(intent.detail)), intent.at)
                    for seq, intent in intents.items()
                ],
            )
            conn.executemany(
                "INSERT INTO counters (run_id, sink, key, value) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (run_id, sink, key) DO UPDATE SET value = max(value, excluded.value)",
                [(run_id, sink, key, value) for key, value in (counters or {}).items()],
            )

    def delivered(self, run_id: str, uploader: str, seqs: Sequence[int], counts: Mapping[str, Any]) -> None:
        """A batch's delivery is over: its records are never replayed, and ``uploader``'s counts include them."""
        with self._write() as conn:
            conn.executemany("INSERT OR IGNORE INTO settled (run_id, seq) VALUES (?, ?)", [(run_id, s) for s in seqs])
            conn.execute(
                "INSERT OR REPLACE INTO sink_counts (run_id, uploader, counts) VALUES (?, ?, ?)",
                (run_id, uploader, json.dumps(dict(counts))),
            )
            conn.executemany("DELETE FROM intents WHERE run_id = ? AND seq = ?", [(run_id, s) for s in seqs])

    def counted(self, run_id: str, what: str, counts: Mapping[str, Any]) -> None:
        """The run's counts of ``what`` (an uploader's sinks, or its arrivals) as of now."""
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO sink_counts (run_id, uploader, counts) VALUES (?, ?, ?)",
                (run_id, what, json.dumps(dict(counts))),
            )

    def unspooled(self, run_id: str, seqs: Sequence[int]) -> None:
        """Records logged but not taken (their sender sends them again): never replayed."""
        with self._write() as conn:
            conn.executemany("INSERT OR IGNORE INTO settled (run_id, seq) VALUES (?, ?)", [(run_id, s) for s in seqs])

    def closed(self, run_id: str) -> None:
        """The run is over: only the fact that it closed is kept."""
        with self._write() as conn:
            conn.execute("UPDATE runs SET closed = 1 WHERE run_id = ?", (run_id,))
            for table in _RUN_TABLES:
                conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
        shutil.rmtree(self._run_folder(run_id), ignore_errors=True)

    # -- the spool of records not yet delivered ----------------------------------------------------

    def spool(self, run_id: str) -> RunSpool:
        return RunSpool(self._run_folder(run_id), self._spool_max_bytes, sinks=[SPOOL_SINK])

    def _run_folder(self, run_id: str) -> Path:
        return self.folder / "runs" / hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:32]

    # -- after a restart ---------------------------------------------------------------------------

    def runs(self) -> list[StoredRun]:
        conn = self._connection()
        stored = {
            row[0]: StoredRun(row[0], row[1], row[2], json.loads(row[3]), row[4], json.loads(row[5]), bool(row[6]))
            for row in conn.execute("SELECT run_id, kind, sender, resource, world_size, ranks, closed FROM runs")
        }
        for run_id, rank, kind, count in conn.execute("SELECT run_id, rank, kind, count FROM arrivals"):
            stored[run_id].received.setdefault(rank, {})[kind] = count
        for run_id, text in conn.execute("SELECT run_id, marker FROM markers"):
            stored[run_id].markers.append(_marker_from_dict(json.loads(text)))
        for run_id, span_id in conn.execute("SELECT run_id, span_id FROM seen_spans"):
            stored[run_id].seen_spans.add(bytes(span_id))
        for run_id, rank, step, time_ns in conn.execute("SELECT run_id, rank, step, time_ns FROM seen_rows"):
            stored[run_id].seen_rows.add((rank, step, time_ns))
        for run_id, seq in conn.execute("SELECT run_id, seq FROM settled"):
            stored[run_id].settled.add(seq)
        for run_id, uploader, counts in conn.execute("SELECT run_id, uploader, counts FROM sink_counts"):
            stored[run_id].counts[uploader] = json.loads(counts)
        for run_id, sink, seq, state, detail, at in conn.execute(
            "SELECT run_id, sink, seq, state, detail, at FROM intents"
        ):
            stored[run_id].intents.setdefault(sink, {})[seq] = Intent(state, json.loads(detail), at)
        for run_id, sink, key, value in conn.execute("SELECT run_id, sink, key, value FROM counters"):
            stored[run_id].counters.setdefault(sink, {})[key] = value
        return list(stored.values())


def _remember(conn: sqlite3.Connection, run_id: str, span_ids: Sequence[bytes]) -> None:
    """The span ids taken for the run (replays of them are dropped)."""
    conn.executemany(
        "INSERT OR IGNORE INTO seen_spans (run_id, span_id) VALUES (?, ?)", [(run_id, span_id) for span_id in span_ids]
    )


def _count_arrivals(conn: sqlite3.Connection, run_id: str, arrivals: Sequence[tuple[int, str, int]]) -> None:
    """Add ``(rank, kind, count)`` arrivals to the run's counts."""
    conn.executemany(
        "INSERT INTO arrivals (run_id, rank, kind, count) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (run_id, rank, kind) DO UPDATE SET count = count + excluded.count",
        [(run_id, rank, kind, count) for rank, kind, count in arrivals],
    )


def _marker_to_dict(marker: EndMarker) -> dict[str, Any]:
    return {
        "rank": marker.rank,
        "status": marker.status.value,
        "error": marker.error,
        "summary": marker.summary,
        "counts": dict(marker.counts),
        "owner": marker.owner,
        "summary_problem": marker.summary_problem,
    }


def _marker_from_dict(data: Mapping[str, Any]) -> EndMarker:
    return EndMarker(
        rank=int(data["rank"]),
        status=RunStatus(data["status"]),
        error=data.get("error"),
        summary=dict(data.get("summary") or {}),
        counts={str(kind): int(count) for kind, count in dict(data.get("counts") or {}).items()},
        owner=bool(data.get("owner")),
        summary_problem=data.get("summary_problem"),
    )
