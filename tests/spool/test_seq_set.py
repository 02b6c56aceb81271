"""The spool ledger's seq sets (issue 6: memory stays bounded while a long outage's backlog is spooled): the
bitmap behaves as a set of ints, iterates in order, and a million pending seqs cost kilobytes."""

from __future__ import annotations

import random
import sys

from prime_otel.processors._spool import SeqSet, SinkLedger


def test_seq_set_behaves_like_a_set_under_random_operations() -> None:
    rnd = random.Random(7)
    ours, reference = SeqSet(), set[int]()
    for _ in range(2000):
        seqs = [rnd.randrange(0, 5000) for _ in range(rnd.randrange(1, 40))]
        if rnd.random() < 0.6:
            ours.update(seqs)
            reference.update(seqs)
        else:
            ours.difference_update(seqs)
            reference.difference_update(seqs)
        if rnd.random() < 0.2:
            count = rnd.randrange(1, 300)
            assert ours.smallest(count) == sorted(reference)[:count]
        assert len(ours) == len(reference)
    assert list(ours) == sorted(reference)
    assert all((seq in ours) == (seq in reference) for seq in range(-3, 5100))
    assert "7" not in ours


def test_a_million_pending_seqs_cost_kilobytes_and_round_trip_through_the_ledger() -> None:
    ledger = SinkLedger()
    ledger.pending.update(range(1_000_000))
    ledger.pending.difference_update(range(0, 1_000_000, 3))
    assert sys.getsizeof(ledger.pending._bits) < 300_000
    restored = SinkLedger.from_dict(ledger.to_dict())
    assert len(restored.pending) == len(ledger.pending) == 666_666
    assert restored.pending.smallest(4) == [1, 2, 4, 5]


def test_seq_set_ranges_are_the_members_runs_under_random_operations() -> None:
    rnd = random.Random(11)
    for _ in range(200):
        reference = {rnd.randrange(0, 3000) for _ in range(rnd.randrange(0, 200))}
        reference |= set(range(rnd.randrange(0, 500), rnd.randrange(500, 2000)))
        ours = SeqSet(reference)
        removed = {rnd.randrange(0, 3000) for _ in range(rnd.randrange(0, 300))}
        ours.difference_update(removed)
        reference -= removed
        ours.smallest(rnd.randrange(0, 4))  # moves the scan's start, never past a member
        runs = [list(r) for r in _runs(sorted(reference))]
        assert ours.ranges() == runs


def _runs(seqs: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for seq in seqs:
        if runs and runs[-1][1] == seq:
            runs[-1] = (runs[-1][0], seq + 1)
        else:
            runs.append((seq, seq + 1))
    return runs
