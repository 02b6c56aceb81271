"""The per-function projection benchmark (``bench_projection.py``), run in its own process and folded in."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks._report import Row, Section

SCRIPT = Path(__file__).resolve().parent / "bench_projection.py"
TIMEOUT_SECONDS = 300.0
_ROW = re.compile(r"^(?P<name>.+?)\s+(?P<theirs>[\d.]+)\s+(?P<ours>[\d.]+)\s+(?P<ratio>[\d.]+)$")


def run_projection(repeat: int, rounds: int) -> dict[str, Any]:
    """``{"rows": [{"scenario", "prime_runs_us", "ours_us"}]}``, or ``{"skipped": reason}`` when it cannot run."""
    command = [sys.executable, str(SCRIPT), "--repeat", str(repeat), "--rounds", str(rounds)]
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        return {"skipped": f"skipped: bench_projection.py took longer than {TIMEOUT_SECONDS:.0f} s"}
    if completed.returncode != 0:
        last = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        return {"skipped": f"skipped: bench_projection.py failed: {last}"}
    rows = []
    for line in completed.stdout.splitlines()[1:]:
        match = _ROW.match(line.strip())
        if match:
            rows.append(
                {"scenario": match["name"], "prime_runs_us": float(match["theirs"]), "ours_us": float(match["ours"])}
            )
    return {"repeat": repeat, "rounds": rounds, "rows": rows}


def projection_section(results: dict[str, Any]) -> Section:
    title = "Projection CPU per episode, in-process (bench_projection.py)"
    if "skipped" in results:
        return Section(title, [results["skipped"]])
    notes = [
        f"fixture episodes x {results['repeat']}, best of {results['rounds']} alternating rounds, CPU us per episode; "
        "where the per-episode CPU of the delivery paths goes."
    ]
    rows = [Row(r["scenario"], r["prime_runs_us"], r["ours_us"], 1, None) for r in results["rows"]]
    return Section(title, notes, rows)
