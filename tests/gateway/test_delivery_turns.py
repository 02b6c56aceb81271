"""A run's backlog on the gateway is delivered in turns of a bounded number of records (each turn's records are
decoded together and held until its sinks wrote them), in the order they arrived, nothing lost or repeated; a
request larger than a turn still goes in one delivery."""

from __future__ import annotations

import threading
from typing import Any

from prime_otel.gateway._pool import MAX_RECORDS_PER_TURN, DeliveryPool


def _batch(first: int, count: int) -> tuple[str, list[int]]:
    return ("episode", list(range(first, first + count)))


def test_a_backlog_is_delivered_in_bounded_turns_in_arrival_order() -> None:
    deliveries: list[list[int]] = []
    release = threading.Event()

    def deliver(batches: list[tuple[str, list[Any]]]) -> None:
        release.wait(10)  # the whole backlog is queued before the first turn ends
        deliveries.append([record for _, records in batches for record in records])

    pool = DeliveryPool(workers=2)
    try:
        lane = pool.lane(deliver, lambda batch: len(batch[1]))
        sizes = [64] * 9 + [MAX_RECORDS_PER_TURN + 40] + [64] * 3 + [1]
        first = 0
        for size in sizes:
            lane.push([_batch(first, size)])
            first += size
        release.set()
        assert lane.wait_idle(10)
    finally:
        pool.stop()

    delivered = [record for turn in deliveries for record in turn]
    assert delivered == list(range(sum(sizes)))
    oversized = [turn for turn in deliveries if len(turn) > MAX_RECORDS_PER_TURN]
    assert [len(turn) for turn in oversized] == [MAX_RECORDS_PER_TURN + 40]
    assert len(deliveries) >= sum(sizes) // MAX_RECORDS_PER_TURN
