"""The gateway's collection policy turns automatic garbage collection off for speed, so it must still reclaim cyclic
garbage on its clock (a long-lived gateway does not leak what reference counting cannot free), and give the
process back its own collection settings when it stops."""

from __future__ import annotations

import gc
import time
import weakref

from prime_otel.gateway._gc import CollectionPolicy


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_cyclic_garbage_is_reclaimed_on_the_clock_and_collection_is_restored_at_stop() -> None:
    assert gc.isenabled()
    policy = CollectionPolicy(full_collection_seconds=0.5)
    policy.start()
    try:
        assert not gc.isenabled()
        garbage = _Cycle()
        gone = weakref.ref(garbage)
        del garbage
        assert gone() is not None  # reference counting alone cannot free a cycle
        deadline = time.monotonic() + 30
        while gone() is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone() is None
    finally:
        policy.stop()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_burst_of_tracked_objects_starts_a_pass_before_its_time() -> None:
    policy = CollectionPolicy(full_collection_seconds=3600, growth_limit=50_000)
    policy.start()
    try:
        garbage = _Cycle()
        gone = weakref.ref(garbage)
        del garbage
        kept = [{} for _ in range(60_000)]  # tracked objects beyond the growth limit
        deadline = time.monotonic() + 30
        while gone() is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone() is None
        del kept
    finally:
        policy.stop()
