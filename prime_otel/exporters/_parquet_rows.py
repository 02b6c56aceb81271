"""The training viewer's Parquet object: one training step's episodes (objects, records, or their v0 rows) as
the 19 columns the viewer reads.

Public through :mod:`prime_otel.projection`.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..records import compact_json, nullify
from ._sample_rows import (
    as_dict,
    encode_row,
    environment_name,
    episode_row,
    episode_traces,
    fits_one_row,
    next_rollout_number,
    own_record,
    per_trace_rows,
    summary_trace_index,
    trace_info,
)

# Parquet JSON columns use json.dumps' default style; one encoder instead of one per call.
_COLUMN_JSON = json.JSONEncoder(allow_nan=False)


def parquet_available() -> bool:
    """Whether pyarrow imports (training samples need it)."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def train_sample_schema() -> Any:
    """Arrow schema of the training viewer's Parquet object: the 19 columns and types it reads."""
    import pyarrow as pa

    string, int64, float64 = pa.string(), pa.int64(), pa.float64()
    return pa.schema(
        [
            ("run_id", string),
            ("step", int64),
            ("tag", string),
            ("problem_id", int64),
            ("sample_id", int64),
            ("prompt", string),
            ("completion", string),
            ("trajectory", string),
            ("answer", string),
            ("env_name", string),
            ("task", string),
            ("info", string),
            ("reward", float64),
            ("advantage", float64),
            ("metrics", string),
            ("timing", string),
            ("num_input_tokens", int64),
            ("num_output_tokens", int64),
            ("created_at", pa.timestamp("us", tz="UTC")),
        ]
    )


def episodes_to_parquet_bytes(
    episodes: Sequence[Any], run_id: str, step: int, *, sample_id_offset: int = 0
) -> bytes | None:
    """One training step's episodes (objects or records) as the viewer's Parquet table: the v0 rows (fresh
    numbering) with the training columns, sample ids counted from ``sample_id_offset``; rows without a trajectory
    are skipped but consume their id. None when no row is left."""
    table = _ParquetTable(run_id, step)
    counts: dict[Any, int] = {}
    sample_id = sample_id_offset
    for episode in episodes:
        traces = episode_traces(episode)
        if not traces:
            continue
        index = summary_trace_index(episode)
        summary = traces[index]
        number = next_rollout_number(counts, summary)
        advantage = (trace_info(summary) or {}).get("advantage")
        env_name = environment_name(episode)
        for row, columns in _parquet_rows(episode, index, number, advantage):
            if columns is not None:
                table.add(row, columns, sample_id, advantage, env_name)
            sample_id += 1
    return table.to_parquet()


def sample_rows_to_parquet_bytes(
    rows: Sequence[Mapping[str, Any]],
    run_id: str,
    step: int,
    *,
    sample_id_offset: int = 0,
    env_names: Mapping[str, str] | None = None,
) -> bytes | None:
    """The Parquet object :func:`episodes_to_parquet_bytes` makes for the same episodes, built from their v0 rows
    (as :func:`encode_samples` made them, in episode order) where the episode objects are not at hand (the OTLP
    gateway). The advantage comes from the summary row's ``info.advantage``, the environment from
    ``info.native_wrapper.env.id``. Rows of an episode too large for one row (one per trace, no
    ``native_wrapper``) name their environment through ``env_names`` (episode id to environment id)."""
    table = _ParquetTable(run_id, step)
    sample_id = sample_id_offset
    for group in _episode_row_groups(rows):
        summary = next((row for row in group if row.get("trainable")), group[0])
        info = summary.get("info") or {}
        advantage = info.get("advantage")
        wrapper = info.get("native_wrapper")
        env = wrapper.get("env") if isinstance(wrapper, Mapping) else None
        if isinstance(env, Mapping):
            env_name = str(env.get("id") or "")
        else:
            env_name = str((env_names or {}).get(str(summary.get("episode_id")), "") or "")
        for row in group:
            parquet_row, columns = _parquet_row(as_dict(row), advantage)
            if columns is not None:
                table.add(parquet_row, columns, sample_id, advantage, env_name)
            sample_id += 1
    return table.to_parquet()


def _episode_row_groups(rows: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """The rows of each episode: a row with ``native_wrapper`` stands alone; consecutive rows without one that
    share an episode id are the per-trace rows of one oversize episode."""
    groups: list[list[Mapping[str, Any]]] = []
    for row in rows:
        whole = "native_wrapper" in (row.get("info") or {})
        previous = groups[-1][-1] if groups else None
        if (
            not whole
            and previous is not None
            and "native_wrapper" not in (previous.get("info") or {})
            and previous.get("episode_id") == row.get("episode_id")
        ):
            groups[-1].append(row)
        else:
            groups.append([row])
    return groups


@dataclass(frozen=True)
class _JsonColumns:
    """The JSON columns of one Parquet row, and an upper bound on the row's compact v0 size: default-style JSON
    (ASCII escapes, spaced separators, plus the trajectory's ``advantage``) is never shorter than compact
    UTF-8 JSON of the same value, so the v0 size check rarely needs an encoding of its own."""

    completion: str
    trajectory: str
    task: str
    info: str
    metrics: str
    timing: str
    size_bound: int

    @classmethod
    def of(cls, row: dict[str, Any], advantage: Any) -> _JsonColumns:
        encode = _COLUMN_JSON.encode
        branch_advantage = nullify(advantage)
        encoded = {
            "completion": encode(row["completion"]),
            "trajectory": encode([{**branch, "advantage": branch_advantage} for branch in row["trajectory"]]),
            "task": encode(row["task"]),
            "info": encode(row["info"]),
            "metrics": encode(row["metrics"]),
            "timing": encode(row["timing"]),
        }
        rest = compact_json({key: value for key, value in row.items() if key not in encoded})
        # Each column adds '"key":' and a comma to the rest's object.
        bound = len(rest) + sum(len(key) + 4 + len(text) for key, text in encoded.items())
        return cls(**encoded, size_bound=bound)


def _parquet_rows(
    episode: Any, index: int, rollout_number: int, advantage: Any
) -> list[tuple[dict[str, Any], _JsonColumns | None]]:
    """The episode's rows (as :func:`encode_episode_samples` decides them) with their JSON columns; None for a
    row without a trajectory, which has no Parquet row."""
    row, columns = _parquet_row(episode_row(episode, index, rollout_number, own_record(episode)), advantage)
    if (columns is not None and fits_one_row(columns.size_bound)) or fits_one_row(len(encode_row(row)[1])):
        return [(row, columns)]
    return [_parquet_row(trace_row, advantage) for trace_row in per_trace_rows(episode, rollout_number)]


def _parquet_row(row: dict[str, Any], advantage: Any) -> tuple[dict[str, Any], _JsonColumns | None]:
    if not row["trajectory"]:
        return row, None
    try:
        return row, _JsonColumns.of(row, advantage)
    except ValueError:
        row = nullify(row)
        return row, _JsonColumns.of(row, advantage)


class _ParquetTable:
    """Column lists of one Parquet object, filled row by row."""

    def __init__(self, run_id: str, step: int) -> None:
        self.run_id = run_id
        self.step = step
        self.rows = 0
        self._columns: dict[str, list[Any]] = {
            name: []
            for name in (
                "problem_id",
                "sample_id",
                "completion",
                "trajectory",
                "env_name",
                "task",
                "info",
                "reward",
                "advantage",
                "metrics",
                "timing",
                "num_input_tokens",
                "num_output_tokens",
            )
        }

    def add(
        self, row: dict[str, Any], json_columns: _JsonColumns, sample_id: int, advantage: Any, env_name: str
    ) -> None:
        last_branch = row["trajectory"][-1]
        values = {
            "problem_id": _problem_id(row["example_id"], sample_id),
            "sample_id": sample_id,
            "completion": json_columns.completion,
            "trajectory": json_columns.trajectory,
            "env_name": env_name,
            "task": json_columns.task,
            "info": json_columns.info,
            "reward": row["reward"],
            "advantage": None if isinstance(advantage, float) and not math.isfinite(advantage) else advantage,
            "metrics": json_columns.metrics,
            "timing": json_columns.timing,
            "num_input_tokens": last_branch["num_input_tokens"],
            "num_output_tokens": last_branch["num_output_tokens"],
        }
        for name, value in values.items():
            self._columns[name].append(value)
        self.rows += 1

    def to_parquet(self) -> bytes | None:
        """The table as the viewer's Parquet object; None without rows."""
        if not self.rows:
            return None
        import pyarrow as pa
        import pyarrow.parquet as pq

        buffer = io.BytesIO()
        pq.write_table(
            pa.Table.from_pydict(self.columns(), schema=train_sample_schema()),
            buffer,
            compression="snappy",
            use_dictionary=True,
            write_statistics=True,
        )
        return buffer.getvalue()

    def columns(self) -> dict[str, list[Any]]:
        """Every column of the schema, ``created_at`` being now for all rows."""
        rows = self.rows
        constant: dict[str, list[Any]] = {
            "run_id": [self.run_id] * rows,
            "step": [self.step] * rows,
            "tag": [""] * rows,
            "prompt": [""] * rows,
            "answer": [""] * rows,
            "created_at": [datetime.now(timezone.utc)] * rows,
        }
        return {**constant, **self._columns}


def _problem_id(example_id: Any, sample_id: int) -> int:
    if example_id is None:
        return sample_id
    try:
        return int(example_id)
    except (TypeError, ValueError):
        return sample_id
