"""The rollout numbers and row keys a numbering sink gives a batch reach the spool's ledger on disk with the
in-flight marker, so that after a crash (a new spool reads the ledger) the request in flight can be read back by its
keys and every record of the batch is numbered again as it was; each sync step is on disk before the next."""

from __future__ import annotations

import json
from pathlib import Path

from prime_otel._attempts import NumberedRows
from prime_otel.processors._spool import RunSpool

SINK = "eval_samples"


def _numbered(seq: int, example: int, number: int) -> NumberedRows:
    return NumberedRows(json.dumps(example), number, [(f"ep{seq}", str(number))])


def test_a_crash_mid_request_leaves_its_keys_and_the_batchs_numbers_on_disk_until_each_record_is_settled(
    tmp_path: Path,
) -> None:
    live = RunSpool(tmp_path, sinks=[SINK])
    seqs = live.append("episode", [json.dumps({"id": f"ep{i}"}).encode() for i in range(4)])
    assert seqs == [0, 1, 2, 3]
    live.begin_write(SINK, seqs)
    live.note_rows(SINK, {0: _numbered(0, 7, 4), 1: _numbered(1, 3, 2), 2: _numbered(2, 7, 5), 3: _numbered(3, 0, 1)})
    live.mark_inflight(SINK, [0, 1])  # the process dies during this request; 2 and 3 were never attempted

    crashed = RunSpool(tmp_path)
    assert crashed.rows_in_flight(SINK) == {0: _numbered(0, 7, 4), 1: _numbered(1, 3, 2)}
    assert crashed.sink(SINK).counters == {"7": 5, "3": 2, "0": 1}  # what the sync numbers new rollouts after
    assert crashed.sink(SINK).inflight_at > 0
    crashed.resolve_in_flight(SINK, stored=[0], absent=[], undecided=[1], reason="the table could not be read")

    # A sync killed right after the read-back: the next one reads nothing back again, and knows why 1 is missing.
    resumed = RunSpool(tmp_path)
    assert resumed.rows_in_flight(SINK) == {}
    resumed.recover([SINK])
    ledger = resumed.sink(SINK)
    assert (ledger.delivered, list(ledger.missing), list(ledger.pending)) == (1, [1], [2, 3])
    assert ledger.missing_reasons == {"the table could not be read": 1}
    assert [resumed.given_number(SINK, seq) for seq in seqs] == [None, None, 5, 1]

    # The replay of record 2 ends its write: its number is dropped, record 3's is kept for its own replay.
    resumed.begin_write(SINK, [2])
    resumed.settle(SINK, [2], replayed=True)
    resumed.end_write(SINK, [2])
    resumed.save()
    assert [RunSpool(tmp_path).given_number(SINK, seq) for seq in (2, 3)] == [None, 1]


def test_rows_the_read_back_proves_absent_wait_for_the_replay_under_the_numbers_they_had(tmp_path: Path) -> None:
    live = RunSpool(tmp_path, sinks=[SINK])
    seqs = live.append("episode", [json.dumps({"id": f"ep{i}"}).encode() for i in range(2)])
    assert seqs is not None
    live.begin_write(SINK, seqs)
    live.note_rows(SINK, {0: _numbered(0, 7, 3), 1: _numbered(1, 7, 4)})
    live.mark_inflight(SINK, seqs)

    crashed = RunSpool(tmp_path)
    crashed.resolve_in_flight(SINK, stored=[], absent=[0, 1], undecided=[], reason="unused")
    resumed = RunSpool(tmp_path)
    resumed.recover([SINK])
    ledger = resumed.sink(SINK)
    assert (list(ledger.pending), list(ledger.missing), ledger.missing_reasons) == ([0, 1], [], {})
    assert [resumed.given_number(SINK, seq) for seq in seqs] == [3, 4]
