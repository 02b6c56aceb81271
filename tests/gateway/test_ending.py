"""When the gateway closes a run and with which status (the rule in ``prime_otel.gateway._ending``)."""

from __future__ import annotations

from typing import Any

from prime_otel import _conventions as conv
from prime_otel._types import RunStatus
from prime_otel.gateway import EndMarker, EndTracker
from prime_otel.gateway._ending import EPISODES, METRIC_ROWS

LEASE = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def marker(rank: int, status: str = "completed", *, episodes: int = 0, owner: bool = False, **extra: Any) -> EndMarker:
    attributes = {conv.END_STATUS: status, conv.END_EPISODES: episodes, conv.END_OWNER: owner, **extra}
    return EndMarker.from_attributes(rank, attributes)


def tracker() -> tuple[EndTracker, Clock]:
    clock = Clock()
    return EndTracker(LEASE, clock), clock


def test_a_single_process_run_closes_once_its_records_and_marker_arrived() -> None:
    ending_tracker, _ = tracker()
    ending_tracker.touch(0, 1)
    ending_tracker.mark(marker(0, episodes=3, owner=True, **{conv.END_SUMMARY_JSON: '{"avg_reward": 0.5}'}))
    ending_tracker.count(0, EPISODES, 2)
    assert ending_tracker.decide() is None  # one episode still on its way (the marker overtook it)
    ending_tracker.count(0, EPISODES, 1)
    ending = ending_tracker.decide()
    assert ending is not None
    assert (ending.status, ending.summary, ending.missing) == (RunStatus.COMPLETED, {"avg_reward": 0.5}, 0)


def test_every_rank_of_the_world_must_end_and_the_owners_status_wins() -> None:
    """A non-owner's failed marker does not change the owner's completed status."""
    ending_tracker, _ = tracker()
    ending_tracker.touch(0, 3)
    ending_tracker.mark(marker(0, owner=True))
    ending_tracker.touch(2, 3)
    ending_tracker.mark(marker(2, "failed", error="rank 2 broke"))
    assert ending_tracker.decide() is None  # rank 1 (of world size 3) never reported yet
    ending_tracker.touch(1, 3)
    ending_tracker.mark(marker(1))
    ending = ending_tracker.decide()
    assert ending is not None and ending.status is RunStatus.COMPLETED and ending.error is None


def test_the_owners_failure_is_the_runs_status() -> None:
    ending_tracker, _ = tracker()
    ending_tracker.touch(1, 2)
    ending_tracker.mark(marker(1))
    ending_tracker.touch(0, 2)
    ending_tracker.mark(marker(0, "failed", owner=True, **{conv.END_ERROR: "ValueError: boom"}))
    ending = ending_tracker.decide()
    assert ending is not None and (ending.status, ending.error) == (RunStatus.FAILED, "ValueError: boom")


def test_silence_past_the_lease_without_the_owners_marker_is_a_crash() -> None:
    ending_tracker, clock = tracker()
    ending_tracker.touch(0, 2)
    ending_tracker.count(0, EPISODES, 5)
    ending_tracker.touch(1, 2)
    ending_tracker.mark(marker(1))
    clock.now += LEASE - 0.1
    assert ending_tracker.decide() is None
    ending_tracker.touch(0, 2)  # any data renews the lease
    clock.now += LEASE - 0.1
    assert ending_tracker.decide() is None
    clock.now += 0.2
    ending = ending_tracker.decide()
    assert ending is not None
    assert ending.status is RunStatus.CRASHED
    assert ending.error == "no data from the producer for 10 s"


def test_after_the_owners_marker_the_lease_closes_with_its_status_and_counts_the_missing() -> None:
    ending_tracker, clock = tracker()
    ending_tracker.touch(0, 1)
    ending_tracker.mark(marker(0, owner=True, episodes=4, **{conv.END_METRIC_ROWS: 2}))
    ending_tracker.count(0, EPISODES, 3)
    ending_tracker.count(0, METRIC_ROWS, 2)
    clock.now += LEASE
    ending = ending_tracker.decide()
    assert ending is not None and (ending.status, ending.missing) == (RunStatus.COMPLETED, 1)


def test_without_an_owner_marker_a_complete_run_is_left_to_its_owner() -> None:
    ending_tracker, _ = tracker()
    ending_tracker.touch(1, 2)
    ending_tracker.mark(marker(1))
    ending_tracker.touch(0, 2)
    ending_tracker.mark(marker(0))
    ending = ending_tracker.decide()
    assert ending is not None and ending.status is None


def test_a_marker_with_a_bad_status_or_summary_still_ends_the_rank() -> None:
    bad = marker(0, "sideways", owner=True, **{conv.END_SUMMARY_JSON: "[1, 2"})
    assert bad.status is RunStatus.FAILED and "sideways" in (bad.error or "") and bad.summary == {}
    assert marker(0, "running").status is RunStatus.FAILED
    assert marker(0, "CRASHED").status is RunStatus.CRASHED
