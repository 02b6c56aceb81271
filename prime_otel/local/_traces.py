"""Prime Traces storage: content-addressed commits, reads by trace, episode and run."""

from __future__ import annotations

import base64
import binascii
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ._db import Database, dumps, loads, now_iso
from ._errors import TracesError
from ._ingest import EpisodeRow, TraceRow, Upload


@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    next_cursor: str | None

    def to_json(self) -> dict[str, Any]:
        return {"items": self.items, "next_cursor": self.next_cursor}


def _encode_cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(f"seq:{seq}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> int:
    if not cursor:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    prefix, _, value = text.partition(":")
    if prefix != "seq" or not value.isdigit():
        raise TracesError(400, "invalid_cursor", "cursor is not one this service issued")
    return int(value)


def _receipt(digest: str) -> dict[str, Any]:
    return {"upload_id": digest, "status": "committed"}


class TraceStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def replay(self, upload_digest: str, line_format: str) -> dict[str, Any] | None:
        """The earlier receipt for these exact bytes, or None when they are new."""
        with self._db.read() as conn:
            return self._replay(conn, upload_digest, line_format)

    @staticmethod
    def _replay(conn: sqlite3.Connection, digest: str, line_format: str) -> dict[str, Any] | None:
        row = conn.execute("SELECT line_format FROM uploads WHERE digest = ?", (digest,)).fetchone()
        if row is None:
            return None
        if row["line_format"] != line_format:
            raise TracesError(
                409,
                "line_format_conflict",
                f"these bytes were committed earlier as {row['line_format']} lines, not {line_format} lines",
            )
        return _receipt(digest)

    def commit(self, upload: Upload, episodes: Sequence[EpisodeRow], traces: Sequence[TraceRow]) -> dict[str, Any]:
        now = now_iso()
        with self._db.write() as conn:
            earlier = self._replay(conn, upload.digest, upload.line_format)
            if earlier is not None:
                return earlier
            conn.execute(
                "INSERT INTO uploads (digest, line_format, team_id, metadata, num_lines, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    upload.digest,
                    upload.line_format,
                    upload.team_id,
                    dumps(upload.metadata),
                    len(episodes) if upload.line_format == "episode" else len(traces),
                    now,
                ),
            )
            seq = Database.next_values(conn, "records", len(episodes) + len(traces))
            for offset, episode in enumerate(episodes):
                self._put_episode(conn, seq + offset, upload, episode, now)
            seq += len(episodes)
            for offset, trace in enumerate(traces):
                self._put_trace(conn, seq + offset, upload, trace)
        return _receipt(upload.digest)

    @staticmethod
    def _put_episode(conn: sqlite3.Connection, seq: int, upload: Upload, episode: EpisodeRow, now: str) -> None:
        # An id seen in an earlier upload is overwritten (latest wins), never duplicated.
        conn.execute(
            "INSERT INTO episodes (seq, id, upload_id, run_id, environment_id, team_id, created_at, doc) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, "
            "upload_id = excluded.upload_id, run_id = excluded.run_id, environment_id = excluded.environment_id, "
            "team_id = excluded.team_id, created_at = excluded.created_at, doc = excluded.doc",
            (seq, episode.id, upload.digest, episode.run_id, episode.environment_id, upload.team_id, now, episode.doc),
        )

    @staticmethod
    def _put_trace(conn: sqlite3.Connection, seq: int, upload: Upload, trace: TraceRow) -> None:
        conn.execute(
            "INSERT INTO traces (seq, id, upload_id, run_id, episode_id, position, environment_id, team_id, step, "
            "reward, created_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
            "seq = excluded.seq, upload_id = excluded.upload_id, run_id = excluded.run_id, "
            "episode_id = excluded.episode_id, position = excluded.position, "
            "environment_id = excluded.environment_id, team_id = excluded.team_id, step = excluded.step, "
            "reward = excluded.reward, created_at = excluded.created_at, doc = excluded.doc",
            (
                seq,
                trace.id,
                upload.digest,
                trace.run_id,
                trace.episode_id,
                trace.position,
                trace.environment_id,
                upload.team_id,
                trace.step,
                trace.reward,
                trace.created_at,
                trace.doc,
            ),
        )

    def run_ids_of_upload(self, digest: str) -> list[str]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT run_id FROM traces WHERE upload_id = ? UNION SELECT run_id FROM episodes WHERE upload_id = ?",
                (digest, digest),
            ).fetchall()
        return sorted(row["run_id"] for row in rows if row["run_id"])

    # -- reads (the service's API) -------------------------------------------

    def list_traces(self, filters: dict[str, Any], limit: int, cursor: str | None) -> Page:
        clauses, params = ["seq > ?"], [_decode_cursor(cursor)]
        for column in ("run_id", "upload_id", "environment_id", "episode_id"):
            if filters.get(column) is not None:
                clauses.append(f"{column} = ?")
                params.append(filters[column])
        for column, op in (("reward_min", ">="), ("reward_max", "<=")):
            if filters.get(column) is not None:
                clauses.append(f"reward {op} ?")
                params.append(filters[column])
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT * FROM traces WHERE {' AND '.join(clauses)} ORDER BY seq LIMIT ?", (*params, limit + 1)
            ).fetchall()
        return self._page([_trace_summary(row) for row in rows[:limit]], rows, limit)

    @staticmethod
    def _page(items: list[dict[str, Any]], rows: Sequence[sqlite3.Row], limit: int) -> Page:
        more = len(rows) > limit
        return Page(items, _encode_cursor(rows[limit - 1]["seq"]) if more and limit > 0 else None)

    def trace(self, trace_id: str) -> sqlite3.Row:
        with self._db.read() as conn:
            row = conn.execute("SELECT * FROM traces WHERE id = ?", (trace_id,)).fetchone()
        if row is None:
            raise TracesError(404, "trace_not_found", f"trace {trace_id} not found")
        return row

    def trace_summary(self, trace_id: str) -> dict[str, Any]:
        return _trace_summary(self.trace(trace_id))

    def list_episodes(self, filters: dict[str, Any], limit: int, cursor: str | None) -> Page:
        clauses, params = ["seq > ?"], [_decode_cursor(cursor)]
        for column in ("run_id", "upload_id", "environment_id"):
            if filters.get(column) is not None:
                clauses.append(f"{column} = ?")
                params.append(filters[column])
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT * FROM episodes WHERE {' AND '.join(clauses)} ORDER BY seq LIMIT ?", (*params, limit + 1)
            ).fetchall()
        return self._page([_episode_summary(row) for row in rows[:limit]], rows, limit)

    def episode(self, episode_id: str) -> sqlite3.Row:
        with self._db.read() as conn:
            row = conn.execute("SELECT * FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        if row is None:
            raise TracesError(404, "episode_not_found", f"episode {episode_id} not found")
        return row

    def episode_summary(self, episode_id: str) -> dict[str, Any]:
        return _episode_summary(self.episode(episode_id))

    def run_summary(self, run_id: str) -> dict[str, Any]:
        with self._db.read() as conn:
            traces = conn.execute(
                "SELECT COUNT(*) AS n, AVG(reward) AS avg_reward, MIN(step) AS step_min, MAX(step) AS step_max "
                "FROM traces WHERE run_id = ?",
                (run_id,),
            ).fetchone()
            episodes = conn.execute("SELECT COUNT(*) FROM episodes WHERE run_id = ?", (run_id,)).fetchone()[0]
        if traces["n"] == 0 and episodes == 0:
            raise TracesError(404, "run_not_found", f"run {run_id} has no traces")
        return {
            "run_id": run_id,
            "trace_count": traces["n"],
            "episode_count": episodes,
            "avg_reward": traces["avg_reward"],
            "step_min": traces["step_min"],
            "step_max": traces["step_max"],
        }

    # -- inspection ------------------------------------------------------------

    def counts(self, run_id: str) -> tuple[int, int]:
        """(traces, episodes) whose own ``run.id`` is ``run_id``."""
        with self._db.read() as conn:
            traces = conn.execute("SELECT COUNT(*) FROM traces WHERE run_id = ?", (run_id,)).fetchone()[0]
            episodes = conn.execute("SELECT COUNT(*) FROM episodes WHERE run_id = ?", (run_id,)).fetchone()[0]
        return int(traces), int(episodes)

    def records(self, run_id: str, offset: int, limit: int) -> tuple[int, list[Any]]:
        """Episode envelopes with their member traces inline, and bare traces, in upload order."""
        union = (
            "SELECT 'episode' AS kind, id, seq, doc FROM episodes WHERE run_id = :run "
            "UNION ALL SELECT 'trace' AS kind, id, seq, doc FROM traces WHERE run_id = :run AND episode_id IS NULL"
        )
        with self._db.read() as conn:
            total = conn.execute(f"SELECT COUNT(*) FROM ({union})", {"run": run_id}).fetchone()[0]
            rows = conn.execute(
                f"SELECT * FROM ({union}) ORDER BY seq LIMIT :limit OFFSET :offset",
                {"run": run_id, "limit": limit, "offset": offset},
            ).fetchall()
            items = [self._inline(conn, row) if row["kind"] == "episode" else loads(row["doc"]) for row in rows]
        return int(total), items

    @staticmethod
    def _inline(conn: sqlite3.Connection, row: sqlite3.Row) -> Any:
        envelope = loads(row["doc"])
        members = conn.execute(
            "SELECT id, doc FROM traces WHERE episode_id = ? ORDER BY position", (row["id"],)
        ).fetchall()
        docs = {member["id"]: loads(member["doc"]) for member in members}
        envelope["traces"] = [docs.get(member_id, member_id) for member_id in _ids(envelope.get("traces"))]
        return envelope


def _ids(value: Any) -> Iterable[Any]:
    return value if isinstance(value, list) else []


def _trace_summary(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "run_id": row["run_id"],
        "episode_id": row["episode_id"],
        "environment_id": row["environment_id"],
        "upload_id": row["upload_id"],
        "team_id": row["team_id"],
        "step": row["step"],
        "reward": row["reward"],
        "created_at": row["created_at"],
    }


def _episode_summary(row: sqlite3.Row) -> dict[str, Any]:
    envelope = loads(row["doc"])
    trace_ids = list(_ids(envelope.get("traces")))
    return {
        "id": row["id"],
        "run_id": row["run_id"],
        "environment_id": row["environment_id"],
        "upload_id": row["upload_id"],
        "team_id": row["team_id"],
        "trace_ids": trace_ids,
        "trace_count": len(trace_ids),
        "created_at": row["created_at"],
    }
