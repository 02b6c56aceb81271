"""``make fleet`` (examples/fleet.py) run as a user runs it, checked the way a user would check it: it exits 0,
both runs it sent through the agent Collector and two gateways are completed on the platform with every episode
there once, no process it started outlives it, and the gateways' bearer token appears nowhere in what it printed
or logged. Skipped without the Collector binary (``make collector``), like the other Collector tests."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from prime_otel._processes import pid_alive
from prime_otel.testing import LocalPlatform, start_local_platform
from tests._collector import built_collector

ROOT = Path(__file__).resolve().parents[2]
FLEET_SECONDS = 240

# The setup builds the Collector when `make test` did not already (about 10 minutes from nothing on 2 cores).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


@dataclass(frozen=True)
class FleetRun:
    result: subprocess.CompletedProcess[str]
    folder: Path

    @property
    def summary(self) -> dict[str, Any]:
        return dict(json.loads((self.folder / "fleet-summary.json").read_text()))

    def runs_of_kind(self, kind: str) -> dict[str, dict[str, Any]]:
        return {run_id: run for run_id, run in self.summary["runs"].items() if run["kind"] == kind}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> FleetRun:
    built_collector()
    folder = tmp_path_factory.mktemp("fleet")
    env = {name: value for name, value in os.environ.items() if not name.startswith(("PRIME_", "OTEL_"))}
    env |= {"PYTHONPATH": str(ROOT), "PRIME_OTEL_FLEET_DATA": str(folder / "data")}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "fleet.py")],
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=FLEET_SECONDS,
        check=False,
    )
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return FleetRun(result, folder / "data")


@pytest.fixture(scope="module")
def platform(fleet: FleetRun) -> Iterator[LocalPlatform]:
    """The fleet's platform, opened again on its data folder after the example stopped it."""
    with start_local_platform(fleet.folder / "platform") as server:
        yield server


def test_the_fleet_sends_one_eval_run_of_two_ranks_and_one_training_run(fleet: FleetRun) -> None:
    eval_runs, training_runs = fleet.runs_of_kind("eval"), fleet.runs_of_kind("train")
    assert len(eval_runs) == 1 and len(training_runs) == 1
    (eval_run,) = eval_runs.values()
    assert eval_run["closures"] == ["handed_to_gateway", "left_to_owner"]  # rank 0 owns it, rank 1 joined
    for run_id, run in fleet.summary["runs"].items():
        assert run["gateway"] in ("gateway-1", "gateway-2")
        assert f"{run['kind']} run {run_id}" in fleet.result.stdout
        assert f"held by {run['gateway']}, closed completed; on the platform: COMPLETED" in fleet.result.stdout


def test_both_runs_are_completed_on_the_platform(fleet: FleetRun, platform: LocalPlatform) -> None:
    for run_id in fleet.summary["runs"]:
        assert platform.inspect.run(run_id)["status"] == "COMPLETED"


def test_every_episode_logged_is_on_the_platform_once(fleet: FleetRun, platform: LocalPlatform) -> None:
    for run_id, run in fleet.summary["runs"].items():
        logged = run["episode_ids"]
        assert len(logged) == len(set(logged)) > 0
        landed = [episode["id"] for episode in platform.inspect.episodes(run_id)["items"]]
        assert sorted(landed) == sorted(logged)
        assert run["problems"] == {}
        assert run["sinks"]["traces"] == len(logged)
    (eval_id,) = fleet.runs_of_kind("eval")
    assert platform.inspect.samples(eval_id)["total"] == len(fleet.summary["runs"][eval_id]["episode_ids"])
    (training_id, training) = next(iter(fleet.runs_of_kind("train").items()))
    rows = sum(
        platform.inspect.step_rows(training_id, step["step"])["total"] for step in platform.inspect.steps(training_id)
    )
    assert rows == len(training["episode_ids"])


def test_no_process_the_fleet_started_outlives_it(fleet: FleetRun) -> None:
    pids = fleet.summary["pids"]
    assert {"platform", "gateway-1", "gateway-2", "collector", "eval-rank0", "eval-rank1", "train"} <= set(pids)
    assert [name for name, pid in pids.items() if pid_alive(pid)] == []


def test_the_gateway_token_is_never_printed_or_logged(fleet: FleetRun) -> None:
    token_file = fleet.folder / "gateway-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text().strip()
    assert len(token) >= 32
    assert token not in fleet.result.stdout + fleet.result.stderr
    logs = sorted((fleet.folder / "logs").glob("*.log"))
    assert len(logs) == len(fleet.summary["pids"])
    assert [log.name for log in logs if token in log.read_text(errors="replace")] == []
