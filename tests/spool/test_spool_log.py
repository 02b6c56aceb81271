"""The spool's log after a crash (issue 6): a line torn by a kill is never read as a record, and the records
logged after a restart are not glued onto it."""

from __future__ import annotations

import json
from pathlib import Path

from prime_otel.processors._spool import RunSpool


def _records(spool: RunSpool, seqs: list[int]) -> dict[int, dict[str, object]]:
    return {record.seq: record.record for record in spool.read(seqs)}


def test_records_logged_after_a_torn_line_are_read_back_whole(tmp_path: Path) -> None:
    first = RunSpool(tmp_path, sinks=["traces"])
    assert first.append("episode", [json.dumps({"id": f"e{i}"}).encode() for i in range(3)]) == [0, 1, 2]
    (segment,) = first.folder.glob("log-*.jsonl")
    with segment.open("ab") as log:
        log.write(b'{"s":3,"k":"episode","r":{"id":"e3","tra')  # killed mid-write

    second = RunSpool(tmp_path, sinks=["traces"])
    seqs = second.append("episode", [b'{"id":"e4"}', b'{"id":"e5"}'])
    assert seqs is not None and min(seqs) >= 3

    third = RunSpool(tmp_path, sinks=["traces"])
    found = _records(third, list(range(0, max(seqs) + 1)))
    assert found == {0: {"id": "e0"}, 1: {"id": "e1"}, 2: {"id": "e2"}, seqs[0]: {"id": "e4"}, seqs[1]: {"id": "e5"}}


def test_a_write_cut_short_by_a_crash_leaves_its_unattempted_records_pending_and_only_the_request_in_flight_missing(
    tmp_path: Path,
) -> None:
    """A batch of six records goes out in requests of two, in an order that is not the log's: after the first request
    stored its records and the second is under way, a crash (the ledger is read from disk by a new spool) settles the
    first two, reports the second two as possibly missing and leaves the last two for a replay."""
    live = RunSpool(tmp_path, sinks=["rft_samples"])
    seqs = live.append("episode", [json.dumps({"id": f"e{i}"}).encode() for i in range(6)])
    assert seqs == [0, 1, 2, 3, 4, 5]
    first, second, never = [1, 4], [0, 5], [2, 3]
    live.begin_write("rft_samples", seqs)
    live.mark_inflight("rft_samples", first)
    live.settle("rft_samples", first)
    live.save()
    live.mark_inflight("rft_samples", second)  # written at once: the process dies during this request

    after = RunSpool(tmp_path)
    after.recover(["rft_samples"])
    ledger = after.sink("rft_samples")
    assert (list(ledger.missing), list(ledger.pending), ledger.delivered) == (second, never, 2)

    again = RunSpool(tmp_path)
    again.recover(["rft_samples"])
    assert (list(again.sink("rft_samples").missing), list(again.sink("rft_samples").pending)) == (second, never)


def test_a_spool_filled_by_one_batch_larger_than_its_bound_takes_records_again_once_that_batch_is_delivered(
    tmp_path: Path,
) -> None:
    """One batch bigger than the whole bound fills the spool from the segment it is still appending to; once every
    sink settled that batch, the segment is freed and new records are kept again (the spool does not stay full for
    good), and a spool opened on the folder afterwards reads only the new records."""
    spool = RunSpool(tmp_path, sinks=["traces"], max_bytes=4096)
    big = [json.dumps({"id": f"big-{i}", "padding": "x" * 1000}).encode() for i in range(8)]
    seqs = spool.append("episode", big)
    assert seqs is not None
    assert spool.append("episode", [b'{"id":"refused"}']) is None  # full
    spool.settle("traces", seqs)
    spool.save()
    kept = spool.append("episode", [b'{"id":"after"}'])
    assert kept is not None
    assert sum(path.stat().st_size for path in spool.folder.glob("log-*.jsonl")) < 4096
    reopened = RunSpool(tmp_path, sinks=["traces"])
    assert _records(reopened, [*seqs, *kept]) == {kept[0]: {"id": "after"}}
