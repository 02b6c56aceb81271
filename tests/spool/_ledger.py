"""What a run folder's spool shows on disk while its producer runs (read by tests to time a kill), and the sync a
test runs on the folder after the kill."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from prime_otel.cli import main

RECORDS_SPOOL = "spool-records"


def sink_ledger(folder: Path, sink: str) -> dict[str, Any]:
    """``sink``'s part of the spool's ledger as last saved ({} before the first save)."""
    try:
        document = json.loads((folder / RECORDS_SPOOL / "ledger.json").read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return dict(document.get("sinks", {}).get(sink, {}))


def in_flight(folder: Path, sink: str) -> int:
    """Records the ledger marks in flight for ``sink`` (a non-idempotent request under way)."""
    return sum(stop - start for start, stop in sink_ledger(folder, sink).get("inflight", []))


def spooled_lines(folder: Path) -> int:
    """Records logged in the spool's segments still on disk."""
    return sum(path.read_bytes().count(b"\n") for path in (folder / RECORDS_SPOOL).glob("log-*.jsonl"))


def sync(folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``prime-otel sync <folder>`` through the CLI's entry point: its exit code and what it printed."""
    capsys.readouterr()
    returncode = main(["sync", str(folder)])
    captured = capsys.readouterr()
    return returncode, captured.out + captured.err
