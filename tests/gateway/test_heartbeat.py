"""A producer on the OTLP path sends a heartbeat while it lives, so the gateway's lease counts from its last sign
of life: a producer quiet for longer than the lease (a long eval step, a checkpoint) is not closed as crashed and
its run completes; without heartbeats the same quiet producer is closed as crashed; a SIGKILLed producer stops
beating and its run is closed as crashed when the lease runs out."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from prime_otel import _conventions as conv
from prime_otel.testing import LocalPlatform
from tests._waiting import wait_for
from tests.gateway._gateway import LEASE_SECONDS, Gateway
from tests.gateway._rank_process import Rank

QUIET_SECONDS = LEASE_SECONDS * 2.5


def producer_env(platform: LocalPlatform, gateway: Gateway, folder: Path, heartbeat: float) -> dict[str, str]:
    env = {
        **os.environ,
        **platform.env,
        "HOME": str(folder),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{gateway.grpc_endpoint}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        conv.HEARTBEAT_SECONDS_ENV: str(heartbeat),
    }
    for name in ("PRIME_RUN_ID", "PRIME_RUN_OWNER_PID", "PRIME_RUN_KIND", "RANK", "WORLD_SIZE"):
        env.pop(name, None)
    return env


def test_a_quiet_but_living_producer_keeps_its_run_open_and_completes_it(
    platform: LocalPlatform, gateway: Gateway, tmp_path: Path
) -> None:
    rank = Rank(producer_env(platform, gateway, tmp_path, heartbeat=0.3), tmp_path / "beating.log")
    try:
        run_id = rank.expect("RUN")
        rank.tell("log 2")
        logged = rank.expect("LOGGED")
        time.sleep(QUIET_SECONDS)  # no records for longer than the lease, only heartbeats
        held = gateway.runs()[run_id]
        assert held["state"] == "open", held
        rank.tell("log 1")
        logged += rank.expect("LOGGED")
        rank.tell("finish")
        rank.expect("DONE")
        closed = gateway.wait_closed(run_id)
    finally:
        rank.stop()
    assert closed["status"] == "completed"
    landed = sorted(episode["id"] for episode in platform.inspect.episodes(run_id)["items"])
    assert landed == sorted(logged)


def test_without_heartbeats_the_same_quiet_producer_is_closed_as_crashed(
    platform: LocalPlatform, gateway: Gateway, tmp_path: Path
) -> None:
    rank = Rank(producer_env(platform, gateway, tmp_path, heartbeat=0), tmp_path / "silent.log")
    try:
        run_id = rank.expect("RUN")
        rank.tell("log 1")
        rank.expect("LOGGED")
        closed = gateway.wait_closed(run_id)
    finally:
        rank.stop()
    assert closed["status"] == "crashed"


def test_a_sigkilled_producer_stops_beating_and_is_closed_as_crashed(
    platform: LocalPlatform, gateway: Gateway, tmp_path: Path
) -> None:
    rank = Rank(producer_env(platform, gateway, tmp_path, heartbeat=0.3), tmp_path / "killed.log")
    try:
        run_id = rank.expect("RUN")
        rank.tell("log 1")
        rank.expect("LOGGED")
        wait_for(lambda: gateway.runs().get(run_id), "the run to reach the gateway")
        rank.process.send_signal(signal.SIGKILL)
        rank.process.wait(10)
        closed = gateway.wait_closed(run_id)
    finally:
        rank.stop()
    assert closed["status"] == "crashed"
    assert closed["error"] == f"no data from the producer for {LEASE_SECONDS} s"
    assert platform.inspect.run(run_id)["status"] == "FAILED"
