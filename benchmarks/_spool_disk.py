"""Spool disk use (issue 19): what the write-ahead log costs on disk, next to the records' own size.

Two runs of ours against the local platform, each in a fresh child: a healthy run of N JSON episode records,
delivered in full (the spool on disk at the end; target 0 bytes, the run folder removed), and a run that logs
at a steady rate through an outage (every samples and Prime Traces POST answered 429 for S seconds from the
child's start), then catches up: the spool's peak on disk during the outage and what stays once delivered.
The records' own size is their compact JSON, as the spool logs them.
"""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._harness import Harness
from benchmarks._report import Section, Table

MIB = 1024 * 1024
OUTAGE_PATHS = ("/api/v1/evaluations/*/samples", "/api/v1/traces")
#: After the outage the child goes on logging this long, so the catch-up happens while it still runs.
TAIL_SECONDS = 10.0


@dataclass(frozen=True)
class SpoolDiskSettings:
    episodes: int  # the delivered run
    outage_s: float
    rate: float  # the outage run's log_episodes calls per second
    batch: int  # episodes per call


def run_spool_disk(harness: Harness, scratch: Path, settings: SpoolDiskSettings) -> dict[str, Any]:
    harness.account(True)
    runs: dict[str, dict[str, Any]] = {}
    base = {"sdk": "ours", "workload": "spool_disk", "batch": settings.batch, "finish_timeout": 300.0}
    print(f"  spool disk: a delivered run of {settings.episodes:,} episodes ...", flush=True)
    runs["delivered"] = _child(harness, scratch / "disk-delivered", {**base, "episodes": settings.episodes})
    calls = int(settings.rate * (settings.outage_s + TAIL_SECONDS))
    print(f"  spool disk: {calls * settings.batch:,} episodes through a {settings.outage_s:g} s outage ...", flush=True)
    for path in OUTAGE_PATHS:
        harness.add_fault(method="POST", path=path, action="fail_before", status=429, retry_after=0, times=None)
    ends = threading.Timer(settings.outage_s, harness.clear_faults)
    ends.start()
    try:
        spec = {**base, "episodes": calls * settings.batch, "rate": settings.rate}
        runs["outage"] = _child(harness, scratch / "disk-outage", spec)
    finally:
        ends.cancel()
        harness.clear_faults()
    return {"settings": vars(settings), "runs": runs}


def _child(harness: Harness, runs_dir: Path, spec: dict[str, Any]) -> dict[str, Any]:
    try:
        return harness.run(spec, timeout=600 + spec["episodes"] * 0.02, env={"PRIME_RUNS_DIR": str(runs_dir)})
    finally:
        shutil.rmtree(runs_dir, ignore_errors=True)


def spool_disk_section(results: dict[str, Any]) -> Section:
    settings, runs = results["settings"], results["runs"]
    labels = {
        "delivered": f"{runs['delivered']['logged']:,} episodes, healthy platform",
        "outage": f"{settings['outage_s']:g} s outage at {settings['rate'] * settings['batch']:g} episodes/s",
    }
    table = Table(
        (
            "run",
            "episodes",
            "records' own size MiB",
            "spool peak MiB",
            "spool at end bytes",
            "run folder at end bytes",
            "stored on platform",
            "complete",
        ),
        [
            (
                labels[name],
                f"{run['logged']:,}",
                f"{run['record_bytes'] / MIB:,.1f}",
                f"{run['peak_spool_bytes'] / MIB:,.1f}",
                f"{run['spool_bytes_at_end']:,}",
                f"{run['run_folder_bytes_at_end']:,}",
                f"{run['stored']['episodes']:,} episodes / {run['stored']['samples']:,} samples",
                "yes" if run["complete"] else "NO",
            )
            for name, run in runs.items()
        ],
    )
    notes = [
        "JSON episode records (fixture records, ids varied), "
        f"{settings['batch']} per log_episodes call; default sinks, traces-enabled account. The spool frees each "
        "segment every sink settled and removes itself (and the run folder) once everything was delivered; the "
        "peak is sampled every 0.1 s. Target: 0 bytes at the end of a delivered run; during an outage the peak "
        "follows the backlog (the records logged while the platform refused them), not the run's history.",
    ]
    return Section("spool disk use (issue 19): ours, next to the records' own size", notes, tables=[table])
