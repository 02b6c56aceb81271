"""The deployment shape: four rank processes (two runs of two ranks) send OTLP to the real Collector (agent
config: ``load_balancing`` on ``run.id``), which spreads the runs over two gateways.

Every record of each run lands once; each run is handled by exactly one gateway; the owner's status decides
(run A's joined rank fails, the run completes); the owner of run B is SIGKILLed after its records left, and the
gateway closes that run as crashed when its lease runs out. Skipped without the Collector binary
(``make collector``)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prime_otel.testing import LocalPlatform
from tests._waiting import wait_for
from tests.gateway._collector import agent_collector
from tests.gateway._gateway import Gateway
from tests.gateway._rank_process import Rank

FLEET_LEASE_SECONDS = 4
FLEET_TOKEN = "fleet-token-5be1"

# The setup builds the Collector when `make test` did not already (about 10 minutes from nothing on 2 cores).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture
def fleet(platform: LocalPlatform, tmp_path: Path) -> Iterator[tuple[list[Gateway], dict[str, str]]]:
    """Two gateways requiring a token behind one agent Collector sending it; yields them and the producers'
    environment."""
    options = ("--lease-seconds", str(FLEET_LEASE_SECONDS))
    with (
        Gateway(platform, tmp_path / "gateway-1", *options, tokens=(FLEET_TOKEN,)) as first,
        Gateway(platform, tmp_path / "gateway-2", *options, tokens=(FLEET_TOKEN,)) as second,
        agent_collector(platform, [first, second], tmp_path, FLEET_TOKEN) as producer_env,
    ):
        yield [first, second], producer_env


def start_run(env: dict[str, str], folder: Path, name: str) -> tuple[Rank, Rank, str]:
    """Rank 0 creates the run; rank 1 joins it through PRIME_RUN_ID, as a launcher's ranks do."""
    owner = Rank({**env, "RANK": "0", "WORLD_SIZE": "2"}, folder / f"{name}-rank0.log")
    run_id = owner.expect("RUN")
    joined_env = {**env, "RANK": "1", "WORLD_SIZE": "2", "PRIME_RUN_ID": run_id, "PRIME_RUN_KIND": "eval"}
    joined_env["PRIME_RUN_OWNER_PID"] = str(owner.process.pid)
    joined = Rank(joined_env, folder / f"{name}-rank1.log")
    assert joined.expect("RUN") == run_id
    return owner, joined, run_id


def test_four_ranks_through_the_collector_land_once_on_one_gateway_each(
    platform: LocalPlatform, fleet: tuple[list[Gateway], dict[str, str]], tmp_path: Path
) -> None:
    gateways, env = fleet
    a_owner, a_joined, run_a = start_run(env, tmp_path, "a")
    b_owner, b_joined, run_b = start_run(env, tmp_path, "b")
    ranks = [a_owner, a_joined, b_owner, b_joined]
    try:
        logged: dict[str, list[str]] = {run_a: [], run_b: []}
        for rank, count in ((a_owner, 5), (a_joined, 4), (b_owner, 3), (b_joined, 2)):
            rank.tell(f"log {count}")
        for rank, run_id in ((a_owner, run_a), (a_joined, run_a), (b_owner, run_b), (b_joined, run_b)):
            logged[run_id] += rank.expect("LOGGED")
        a_joined.tell("fail")
        a_owner.tell("finish")
        b_joined.tell("finish")
        for rank in (a_joined, a_owner, b_joined):
            rank.expect("DONE")
        b_owner.process.send_signal(signal.SIGKILL)
        b_owner.process.wait(10)

        closed = {run_id: _closed_on_one_gateway(gateways, run_id) for run_id in (run_a, run_b)}
    finally:
        for rank in ranks:
            rank.stop()

    assert closed[run_a]["status"] == "completed"
    assert closed[run_b]["status"] == "crashed"
    assert platform.inspect.run(run_a)["status"] in ("PROCESSING", "COMPLETED")
    crashed = platform.inspect.run(run_b)
    assert crashed["status"] == "FAILED"
    assert crashed["error_message"] == f"crashed: no data from the producer for {FLEET_LEASE_SECONDS} s"
    for run_id, ids in logged.items():
        landed = [episode["id"] for episode in platform.inspect.episodes(run_id)["items"]]
        assert sorted(landed) == sorted(ids)  # every record once, none twice


def _closed_on_one_gateway(gateways: list[Gateway], run_id: str) -> dict[str, Any]:
    def closed() -> dict[str, Any] | None:
        held = [gateway.runs().get(run_id) for gateway in gateways]
        held = [run for run in held if run is not None]
        assert len(held) <= 1, f"run {run_id} reached {len(held)} gateways"
        return held[0] if held and held[0]["state"] == "closed" else None

    return wait_for(closed, f"run {run_id} to be closed")  # type: ignore[no-any-return]
