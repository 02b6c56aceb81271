"""What the viewer sorts, filters and summarises runs by: a few facts per stored record, kept per run.

Records are append-only apart from overwrites by id, which get a new ``seq``, so each run's facts are
brought up to date by reading only the rows past the last ``seq`` seen; a run whose row count no
longer matches (a record moved to another run) is read again from the start.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ._db import Database, loads

SortOrder = Literal["reward", "-reward"]
Outcome = Literal["ok", "error"]

HISTOGRAM_BINS = 10

_TRACE_FACTS = (
    "SELECT id, seq, episode_id, environment_id, reward, "
    "json_type(doc, '$.rewards') AS rewards_type, json_extract(doc, '$.rewards') AS rewards, "
    "json_extract(doc, '$.agent.trainable') AS trainable, json_extract(doc, '$.ok') AS ok, "
    "json_array_length(doc, '$.errors') AS errors, json_extract(doc, '$.metrics') AS metrics, "
    "json_extract(doc, '$.num_input_tokens') AS input_tokens, "
    "json_extract(doc, '$.num_output_tokens') AS output_tokens "
    "FROM traces WHERE run_id = ? AND seq > ? ORDER BY seq"
)
_EPISODE_FACTS = (
    "SELECT id, seq, environment_id, json_extract(doc, '$.ok') AS ok, "
    "json_array_length(doc, '$.errors') AS errors, json_extract(doc, '$.traces') AS members "
    "FROM episodes WHERE run_id = ? AND seq > ? ORDER BY seq"
)
_SAMPLE_FACTS = (
    "SELECT seq, json_extract(row, '$.reward') AS reward, json_type(row, '$.error') AS error_type, "
    "json_extract(row, '$.is_completed') AS completed, "
    "json_extract(row, '$.info.native_wrapper.env.id') AS environment_id, "
    "json_extract(row, '$.metrics') AS metrics, "
    "json_extract(row, '$.token_usage.prompt_tokens') AS input_tokens, "
    "json_extract(row, '$.token_usage.completion_tokens') AS output_tokens "
    "FROM samples WHERE run_id = ? AND seq > ? ORDER BY seq"
)


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _count(value: Any) -> int:
    number = _number(value)
    return int(number) if number is not None else 0


def _json_object(text: Any) -> Mapping[str, Any]:
    """A JSON object given as text (what ``json_extract`` gives for an object); empty for anything else."""
    if not isinstance(text, str):
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, Mapping) else {}


def _numbers(text: Any) -> dict[str, float]:
    """The finite numbers of a JSON object given as text."""
    value = _json_object(text)
    return {str(name): number for name, item in value.items() if (number := _number(item)) is not None}


def _scores(text: Any) -> dict[str, float]:
    """``{name: score}`` of a verifiers ``rewards`` object, scores that ran only."""
    value = _json_object(text)
    scores = {}
    for name, entry in value.items():
        score = _number(entry.get("score")) if isinstance(entry, Mapping) else None
        if score is not None:
            scores[str(name)] = score
    return scores


@dataclass(frozen=True)
class _Trace:
    id: str
    seq: int
    episode_id: str | None
    environment_id: str
    reward: float | None
    trainable: bool
    ok: bool | None
    errors: int
    metrics: dict[str, float]
    input_tokens: int
    output_tokens: int

    @property
    def key(self) -> str:
        return self.id

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> _Trace:
        reward = _number(row["reward"])
        if reward is None and row["rewards_type"] == "object":
            reward = 0.0  # verifiers' reward when nothing was scored
        return cls(
            id=row["id"],
            seq=row["seq"],
            episode_id=row["episode_id"],
            environment_id=row["environment_id"] or "",
            reward=reward,
            trainable=row["trainable"] not in (0, False),
            ok=None if row["ok"] is None else bool(row["ok"]),
            errors=_count(row["errors"]),
            metrics={**_scores(row["rewards"]), **_numbers(row["metrics"])},
            input_tokens=_count(row["input_tokens"]),
            output_tokens=_count(row["output_tokens"]),
        )


@dataclass(frozen=True)
class _Episode:
    id: str
    seq: int
    environment_id: str
    ok: bool | None
    errors: int
    members: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.id

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> _Episode:
        members = loads(row["members"]) if isinstance(row["members"], str) else []
        return cls(
            id=row["id"],
            seq=row["seq"],
            environment_id=row["environment_id"] or "",
            ok=None if row["ok"] is None else bool(row["ok"]),
            errors=_count(row["errors"]),
            members=tuple(m for m in members if isinstance(m, str)) if isinstance(members, list) else (),
        )


@dataclass(frozen=True)
class _RowFacts:
    """What the run's tables show of one row, whatever the table."""

    seq: int
    environment_id: str
    ok: bool
    reward: float | None
    metrics: dict[str, float]
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class RecordFacts(_RowFacts):
    """One row of a run's episodes list: an episode (its summary trace's reward) or a bare trace."""

    kind: Literal["episode", "trace"]
    id: str


@dataclass(frozen=True)
class SampleFacts(_RowFacts):
    """One row of a run's samples table."""

    @property
    def key(self) -> int:
        return self.seq

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> SampleFacts:
        return cls(
            seq=row["seq"],
            environment_id=row["environment_id"] if isinstance(row["environment_id"], str) else "",
            ok=row["error_type"] in (None, "null") and row["completed"] not in (0, False),
            reward=_number(row["reward"]),
            metrics=_numbers(row["metrics"]),
            input_tokens=_count(row["input_tokens"]),
            output_tokens=_count(row["output_tokens"]),
        )


def _episode_record(episode: _Episode, traces: Mapping[str, _Trace]) -> RecordFacts:
    members = [traces[m] for m in episode.members if m in traces]
    summary = next((t for t in members if t.trainable), members[0] if members else None)
    failed = episode.ok is False or episode.errors > 0 or any(t.ok is False or t.errors > 0 for t in members)
    return RecordFacts(
        kind="episode",
        id=episode.id,
        seq=episode.seq,
        environment_id=episode.environment_id,
        ok=not failed,
        reward=summary.reward if summary else None,
        metrics=summary.metrics if summary else {},
        input_tokens=sum(t.input_tokens for t in members),
        output_tokens=sum(t.output_tokens for t in members),
    )


def _trace_record(trace: _Trace) -> RecordFacts:
    return RecordFacts(
        kind="trace",
        id=trace.id,
        seq=trace.seq,
        environment_id=trace.environment_id,
        ok=trace.ok is not False and trace.errors == 0,
        reward=trace.reward,
        metrics=trace.metrics,
        input_tokens=trace.input_tokens,
        output_tokens=trace.output_tokens,
    )


@dataclass
class _Rows:
    """Facts of one table's rows of one run, keyed by the row's identity, and the last ``seq`` read."""

    by_key: dict[Any, Any] = field(default_factory=dict)
    last_seq: int = 0


@dataclass
class _RunFacts:
    traces: _Rows = field(default_factory=_Rows)
    episodes: _Rows = field(default_factory=_Rows)
    samples: _Rows = field(default_factory=_Rows)
    records: list[RecordFacts] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class PageQuery:
    """How the viewer asked a run's rows to be filtered and ordered; the default is upload order."""

    sort: SortOrder | None = None
    outcome: Outcome | None = None
    environment: str | None = None

    @property
    def is_default(self) -> bool:
        return self.sort is None and self.outcome is None and self.environment is None

    def apply(self, rows: Sequence[RecordFacts | SampleFacts]) -> list[Any]:
        kept = [
            row
            for row in rows
            if (self.outcome is None or row.ok == (self.outcome == "ok"))
            and (self.environment is None or row.environment_id == self.environment)
        ]
        if self.sort is not None:
            descending = self.sort == "-reward"
            scored = [row for row in kept if row.reward is not None]
            scored.sort(key=lambda row: (row.reward, -row.seq if descending else row.seq), reverse=descending)
            kept = scored + [row for row in kept if row.reward is None]
        return kept


def _histogram(rewards: Sequence[float]) -> list[dict[str, float | int]]:
    if not rewards:
        return []
    low, high = min(rewards), max(rewards)
    if low >= 0 and high <= 1:
        low, high = 0.0, 1.0
    if high == low:
        return [{"lo": low, "hi": high, "count": len(rewards)}]
    width = (high - low) / HISTOGRAM_BINS
    counts = [0] * HISTOGRAM_BINS
    for reward in rewards:
        counts[min(HISTOGRAM_BINS - 1, int((reward - low) / width))] += 1
    return [
        {"lo": round(low + i * width, 12), "hi": round(low + (i + 1) * width, 12), "count": count}
        for i, count in enumerate(counts)
    ]


def _mean(values: Iterable[float]) -> float | None:
    listed = list(values)
    return sum(listed) / len(listed) if listed else None


def summarise(rows: Sequence[RecordFacts | SampleFacts], names: Mapping[str, str]) -> dict[str, Any]:
    """Cards and histogram of a run's rows: reward, error rate, per-metric means, tokens, environments."""
    rewards = [row.reward for row in rows if row.reward is not None]
    metric_values: dict[str, list[float]] = {}
    for row in rows:
        for name, value in row.metrics.items():
            metric_values.setdefault(name, []).append(value)
    errors = sum(1 for row in rows if not row.ok)
    environments = Counter(row.environment_id for row in rows if row.environment_id)
    return {
        "count": len(rows),
        "errors": errors,
        "error_rate": errors / len(rows) if rows else None,
        "avg_reward": _mean(rewards),
        "rewarded": len(rewards),
        "reward_histogram": _histogram(rewards),
        "avg_metrics": {name: _mean(values) for name, values in sorted(metric_values.items())},
        "tokens": {
            "input": sum(row.input_tokens for row in rows),
            "output": sum(row.output_tokens for row in rows),
        },
        "environments": [
            {"id": env, "name": names.get(env, env), "count": count} for env, count in sorted(environments.items())
        ],
    }


class RunIndex:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._runs: dict[str, _RunFacts] = {}
        self._lock = threading.Lock()

    def _facts(self, run_id: str) -> _RunFacts:
        with self._lock:
            return self._runs.setdefault(run_id, _RunFacts())

    # -- reading up to date ------------------------------------------------------

    @staticmethod
    def _catch_up(conn: sqlite3.Connection, rows: _Rows, table: str, query: str, run_id: str, make: Any) -> bool:
        """Reads the rows past ``rows.last_seq``; True when anything changed."""
        stored = conn.execute(f"SELECT COUNT(*), MAX(seq) FROM {table} WHERE run_id = ?", (run_id,)).fetchone()
        count, last = int(stored[0]), int(stored[1] or 0)
        if count == len(rows.by_key) and last == rows.last_seq:
            return False
        for start in (rows.last_seq, 0):
            if start == 0:
                rows.by_key = {}
            for row in conn.execute(query, (run_id, start)):
                fact = make(row)
                rows.by_key[fact.key] = fact
            if len(rows.by_key) == count:
                break  # otherwise a record left this run: read it all again
        rows.last_seq = last
        return True

    def records(self, run_id: str) -> list[RecordFacts]:
        """Episodes and bare traces of the run in upload order."""
        facts = self._facts(run_id)
        with facts.lock, self._db.read() as conn:
            changed = self._catch_up(conn, facts.traces, "traces", _TRACE_FACTS, run_id, _Trace.from_row)
            changed |= self._catch_up(conn, facts.episodes, "episodes", _EPISODE_FACTS, run_id, _Episode.from_row)
            records = facts.records
            if changed or records is None:
                traces: dict[str, _Trace] = facts.traces.by_key
                records = [_episode_record(e, traces) for e in facts.episodes.by_key.values()]
                records += [_trace_record(t) for t in traces.values() if t.episode_id is None]
                records.sort(key=lambda record: record.seq)
                facts.records = records
            return records

    def samples(self, run_id: str) -> list[SampleFacts]:
        facts = self._facts(run_id)
        with facts.lock, self._db.read() as conn:
            self._catch_up(conn, facts.samples, "samples", _SAMPLE_FACTS, run_id, SampleFacts.from_row)
            return list(facts.samples.by_key.values())

    # -- the documents of one page -------------------------------------------------

    def sample_rows(self, page: Sequence[SampleFacts]) -> list[Any]:
        seqs = [row.seq for row in page]
        with self._db.read() as conn:
            stored = {
                row["seq"]: loads(row["row"])
                for row in conn.execute(
                    f"SELECT seq, row FROM samples WHERE seq IN ({','.join('?' * len(seqs))})", seqs
                )
            }
        return [stored[seq] for seq in seqs if seq in stored]

    def record_docs(self, page: Sequence[RecordFacts]) -> list[Any]:
        """Episode envelopes with their member traces inline, and bare traces, as the episodes page serves them."""
        with self._db.read() as conn:
            return [doc for record in page if (doc := self._record_doc(conn, record.kind, record.id)) is not None]

    def record(self, run_id: str, record_id: str) -> Any:
        """One episode (members inline) or bare trace of the run, or None."""
        with self._db.read() as conn:
            episode = conn.execute("SELECT 1 FROM episodes WHERE id = ? AND run_id = ?", (record_id, run_id)).fetchone()
            if episode is not None:
                return self._record_doc(conn, "episode", record_id)
            trace = conn.execute(
                "SELECT 1 FROM traces WHERE id = ? AND run_id = ? AND episode_id IS NULL", (record_id, run_id)
            ).fetchone()
            return None if trace is None else self._record_doc(conn, "trace", record_id)

    @staticmethod
    def _record_doc(conn: sqlite3.Connection, kind: str, record_id: str) -> Any:
        table = "episodes" if kind == "episode" else "traces"
        row = conn.execute(f"SELECT doc FROM {table} WHERE id = ?", (record_id,)).fetchone()
        if row is None:
            return None
        doc = loads(row["doc"])
        if kind == "episode" and isinstance(doc, dict):
            listed = doc.get("traces")
            ids = listed if isinstance(listed, list) else []
            members = {
                member["id"]: loads(member["doc"])
                for member in conn.execute("SELECT id, doc FROM traces WHERE episode_id = ?", (record_id,))
            }
            doc["traces"] = [members.get(member_id, member_id) for member_id in ids]
        return doc

    # -- names -----------------------------------------------------------------------

    def environment_names(self, ids: Iterable[str]) -> dict[str, str]:
        """Names of the environments hub ids among ``ids``; other ids are left out."""
        wanted = sorted({i for i in ids if isinstance(i, str) and i})
        if not wanted:
            return {}
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT id, name FROM environments WHERE id IN ({','.join('?' * len(wanted))})", wanted
            ).fetchall()
        return {row["id"]: row["name"] for row in rows}
