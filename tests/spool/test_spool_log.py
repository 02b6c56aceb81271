"""The spool's log after a crash (issue 6): a line torn by a kill is never read as a record, and the records
logged after a restart are not glued onto it."""

from __future__ import annotations

import json
from pathlib import Path

from prime_otel._spool import RunSpool


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
