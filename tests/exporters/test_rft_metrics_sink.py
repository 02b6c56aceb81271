"""The training metrics sink sends one request per step row; the platform keeps one row per step, so a repeat
(a replay) merges instead of storing twice. A row that is not a mapping costs only itself."""

from __future__ import annotations

from typing import Any

import pytest

from prime_otel._sink import SinkWriteError
from prime_otel.client import PlatformHTTP, TrainingRunsAPI
from prime_otel.exporters.rft_metrics import RftMetricsSink
from prime_otel.testing import LocalPlatform
from tests.exporters._platform_runs import open_training


def _rows(platform: LocalPlatform, run_id: str) -> list[dict[str, Any]]:
    return list(platform.inspect.run(run_id)["metric_rows"])


def test_each_row_is_stored_once_per_step_and_a_replay_merges(platform: LocalPlatform, http: PlatformHTTP) -> None:
    run_id = open_training(http)
    sink = RftMetricsSink(TrainingRunsAPI(http), run_id)
    rows = [{"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.25, "reward": 1.0}]

    sink.write(rows)
    sink.write(rows[1:])

    assert sink.replay_safe
    assert (sink.stats.delivered, sink.stats.requests) == (3, 3)
    stored = _rows(platform, run_id)
    assert [(row["step"], row["loss"]) for row in stored] == [(1, 0.5), (2, 0.25)]
    assert stored[1]["reward"] == 1.0


def test_a_row_that_is_not_a_mapping_is_lost_alone(platform: LocalPlatform, http: PlatformHTTP) -> None:
    run_id = open_training(http)
    sink = RftMetricsSink(TrainingRunsAPI(http), run_id)

    with pytest.raises(SinkWriteError) as failed:
        sink.write([{"step": 1, "loss": 0.5}, ["not", "a", "row"], {"step": 3, "loss": 0.125}])  # type: ignore[list-item]

    assert failed.value.lost_positions(3) == [1]
    assert [row["step"] for row in _rows(platform, run_id)] == [1, 3]
