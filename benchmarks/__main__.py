"""``make bench``: our SDK side by side with the released prime-runs 0.1.4, in one run, as ratios.

Starts one local platform, runs the eval and training workloads through both SDKs (each run in a fresh
process, alternating order over rounds, medians reported), the Parquet and projection encoders in-process,
the spool workload against a slow platform, prints one combined table and writes
``benchmarks/results/latest.json`` and ``latest.md`` (``latest-<parts>.*`` with ``--only``). The training
memory soak (``memory``), the spool's disk use (``spooldisk``) and the gateway benchmark (``gateway``:
``bench_gateway.py``) run only when asked for with ``--only``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform as host
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Any

from benchmarks._eval import SCENARIOS, Scenario, eval_sections, run_eval
from benchmarks._harness import Harness
from benchmarks._memory import MemorySettings, memory_section, run_memory
from benchmarks._pacing import PacingSettings, pacing_sections, run_pacing
from benchmarks._parquet import parquet_section, run_parquet
from benchmarks._projection import projection_section, run_projection
from benchmarks._report import Section, render_markdown, render_text
from benchmarks._spool import SpoolSettings, run_spool, spool_sections
from benchmarks._spool_disk import SpoolDiskSettings, run_spool_disk, spool_disk_section
from benchmarks._train import run_train, train_section
from benchmarks._workload import train_steps
from prime_otel.testing import start_local_platform

RESULTS = Path(__file__).resolve().parent / "results"
PROFILE_LINES = 30
PARTS = ("eval", "train", "parquet", "projection", "spool", "pacing", "spooldisk", "memory", "gateway")
OPTIONAL_PARTS = frozenset({"memory", "spooldisk", "gateway"})  # only with --only
SPOOL_EPISODES = 100_000


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2000, help="eval episodes per run (default 2000)")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds per comparison (default 7)")
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help=f"eval scenarios, comma-separated: {', '.join(SCENARIOS)}"
    )
    parser.add_argument("--steps", type=int, default=60, help="training steps (default 60)")
    parser.add_argument("--per-step", type=int, default=16, help="training episodes per step (default 16)")
    parser.add_argument("--parquet-rounds", type=int, default=3, help="best of N for Parquet encoding (default 3)")
    parser.add_argument("--projection-repeat", type=int, default=50, help="bench_projection.py --repeat; 0 skips")
    parser.add_argument("--skip-train", action="store_true", help="leave out the training workload and Parquet")
    parser.add_argument("--skip-spool", action="store_true", help="leave out the spool workload")
    parser.add_argument(
        "--only", default="", help=f"run only these parts, comma-separated: {', '.join(PARTS)} (e.g. --only spool)"
    )
    parser.add_argument(
        "--spool-episodes",
        type=int,
        default=SPOOL_EPISODES,
        help=f"spool: our log_episodes calls (default {SPOOL_EPISODES:,}, issue 6's figure; about 2 minutes)",
    )
    parser.add_argument("--spool-window", type=int, default=0, help="spool: calls per progress sample (0: N/10)")
    parser.add_argument(
        "--spool-compare", type=int, default=5000, help="spool: prime-runs 0.1.4's calls (default 5000; 0 skips)"
    )
    parser.add_argument("--spool-delay", type=float, default=1.0, help="spool: seconds every POST is delayed")
    parser.add_argument("--spool-finish-timeout", type=float, default=10.0, help="spool: finish(timeout=)")
    parser.add_argument("--pacing-episodes", type=int, default=1000, help="pacing: eval episodes (default 1000)")
    parser.add_argument("--pacing-rate", type=float, default=100.0, help="pacing: episodes per second (default 100)")
    parser.add_argument("--pacing-steps", type=int, default=1000, help="pacing: training steps (default 1000)")
    parser.add_argument(
        "--pacing-limited-steps", type=int, default=30, help="pacing: training steps at the default limit (default 30)"
    )
    parser.add_argument(
        "--spool-disk-episodes", type=int, default=50_000, help="spooldisk: the delivered run (default 50,000)"
    )
    parser.add_argument("--spool-disk-outage", type=float, default=60.0, help="spooldisk: outage seconds (60)")
    parser.add_argument("--spool-disk-rate", type=float, default=2.0, help="spooldisk: calls per second (2)")
    parser.add_argument("--spool-disk-batch", type=int, default=50, help="spooldisk: episodes per call (50)")
    parser.add_argument("--memory-steps", type=int, default=4000, help="memory: training steps (default 4000)")
    parser.add_argument("--memory-per-step", type=int, default=8, help="memory: episodes per step (default 8)")
    parser.add_argument("--memory-window", type=int, default=500, help="memory: steps per RSS sample (default 500)")
    parser.add_argument(
        "--memory-pause-ms", type=float, default=0.0, help="memory: the trainer's own work per step (default 0)"
    )
    parser.add_argument("--memory-rounds", type=int, default=1, help="memory: alternating rounds (default 1)")
    parser.add_argument(
        "--profile", action="store_true", help="also run one cProfiled child of ours per eval scenario (not measured)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where latest.json and latest.md go")
    return parser.parse_args(argv)


def selected_parts(args: argparse.Namespace) -> list[str]:
    if args.only:
        chosen = [part.strip() for part in args.only.split(",") if part.strip()]
        unknown = sorted(set(chosen) - set(PARTS))
        if unknown:
            raise SystemExit(f"--only: unknown parts {unknown}; choose from {', '.join(PARTS)}")
        return [part for part in PARTS if part in chosen]
    skipped = set(OPTIONAL_PARTS) | ({"train", "parquet"} if args.skip_train else set())
    skipped |= {"spool"} if args.skip_spool else set()
    skipped |= {"projection"} if args.projection_repeat <= 0 else set()
    return [part for part in PARTS if part not in skipped]


def environment() -> dict[str, Any]:
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "machine": f"{host.system()} {host.machine()}, {os.cpu_count()} cores",
        "prime_runs": version("prime-runs"),
        "prime_otel": version("prime-otel"),
        "verifiers": version("verifiers"),
        "load_average_at_start": os.getloadavg()[0],
        "commit": source_commit(),
    }


def source_commit() -> str:
    """The checkout measured: HEAD, marked dirty when prime_otel has uncommitted changes."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        completed = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
        return completed.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--", "prime_otel") else "")


def profile_ours(harness: Harness, scenarios: list[Scenario], episodes: int, out: Path) -> dict[str, str]:
    """One extra cProfiled run of ours per scenario; the top functions by own time, written next to the results."""
    reports = {}
    for scenario in scenarios:
        harness.account(scenario.traces_enabled)
        raw = out / f"profile-eval-{scenario.key}.prof"
        spec = {"sdk": "ours", "workload": "eval", "episodes": episodes, "sinks": scenario.our_sinks}
        harness.run({**spec, "profile": str(raw)})
        text = out / f"profile-eval-{scenario.key}.txt"
        with text.open("w") as stream:
            stats = pstats.Stats(str(raw), stream=stream)
            stats.strip_dirs().sort_stats("tottime").print_stats(PROFILE_LINES)
            stats.sort_stats("cumulative").print_stats(PROFILE_LINES)
        raw.unlink()
        reports[scenario.key] = str(text)
    harness.account(True)
    return reports


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    parts = selected_parts(args)
    scenarios = [SCENARIOS[key.strip()] for key in args.scenarios.split(",") if key.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    results: dict[str, Any] = {"environment": environment(), "settings": {k: str(v) for k, v in vars(args).items()}}
    sections: list[Section] = []
    with tempfile.TemporaryDirectory(prefix="prime-bench-") as scratch:
        if {"eval", "train", "spool", "spooldisk", "memory"} & set(parts):
            print(f"starting the local platform in {scratch} ...", flush=True)
            with start_local_platform(
                Path(scratch) / "platform", samples_rate_limit=100000, metrics_rate_limit=100000
            ) as platform:
                harness = Harness(platform, Path(scratch))
                if "eval" in parts:
                    eval_runs = run_eval(harness, scenarios, args.episodes, args.rounds)
                    results["eval"] = eval_runs
                    sections += eval_sections(scenarios, eval_runs, args.episodes, args.rounds)
                if "train" in parts:
                    train_runs = run_train(harness, args.steps, args.per_step, args.rounds)
                    results["train"] = train_runs
                    sections.append(train_section(train_runs, args.steps, args.per_step, args.rounds))
                if args.profile and "eval" in parts:
                    results["profiles"] = profile_ours(harness, scenarios, args.episodes, args.out)
                if "spool" in parts:
                    settings = SpoolSettings(
                        args.spool_episodes,
                        args.spool_window,
                        args.spool_compare,
                        args.spool_delay,
                        args.spool_finish_timeout,
                    )
                    results["spool"] = run_spool(harness, Path(scratch), settings)
                    sections += spool_sections(results["spool"])
                if "spooldisk" in parts:
                    disk = SpoolDiskSettings(
                        args.spool_disk_episodes, args.spool_disk_outage, args.spool_disk_rate, args.spool_disk_batch
                    )
                    results["spooldisk"] = run_spool_disk(harness, Path(scratch), disk)
                    sections.append(spool_disk_section(results["spooldisk"]))
                if "memory" in parts:
                    soak = MemorySettings(
                        args.memory_steps,
                        args.memory_per_step,
                        args.memory_window,
                        args.memory_pause_ms / 1000,
                        args.memory_rounds,
                    )
                    results["memory"] = run_memory(harness, Path(scratch), soak)
                    sections.append(memory_section(results["memory"]))
    if "pacing" in parts:
        print("pacing: the rate-limited endpoints at the platform's limits ...", flush=True)
        pacing = PacingSettings(args.pacing_episodes, args.pacing_rate, args.pacing_steps, args.pacing_limited_steps)
        with tempfile.TemporaryDirectory(prefix="prime-bench-pacing-") as scratch:
            results["pacing"] = run_pacing(Path(scratch), pacing)
        sections += pacing_sections(results["pacing"], pacing)
    if "parquet" in parts:
        print("Parquet encoding ...", flush=True)
        results["parquet"] = run_parquet(train_steps(args.steps, args.per_step), args.parquet_rounds)
        sections.append(parquet_section(results["parquet"]))
    if "projection" in parts:
        print("bench_projection.py ...", flush=True)
        results["projection"] = run_projection(args.projection_repeat, rounds=3)
        sections.append(projection_section(results["projection"]))
    if "gateway" in parts:
        from benchmarks import bench_gateway

        print("bench_gateway.py (cost, throughput, fleet scaling behind the Collector) ...", flush=True)
        gateway_json = args.out / "gateway.json"
        bench_gateway.main(["--out", str(gateway_json), "--rounds", str(min(args.rounds, 5))])
        results["gateway"] = json.loads(gateway_json.read_text())
    results["elapsed_s"] = time.monotonic() - began
    results["sections"] = [section.to_dict() for section in sections]

    env = results["environment"]
    heading = (
        f"prime-otel {env['prime_otel']} vs prime-runs {env['prime_runs']} (verifiers {env['verifiers']}), "
        f"Python {env['python']}, {env['machine']} (load average {env['load_average_at_start']:.1f} at start), "
        f"commit {env['commit']}, {env['date']}; took {results['elapsed_s']:.0f} s"
    )
    print("\n" + heading + "\n" + render_text(sections))
    stem = "latest-" + "-".join(parts) if args.only else "latest"
    command = "make bench" if stem == "latest" else f"python -m benchmarks --only {','.join(parts)}"
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    preamble = ["## Benchmarks: prime-otel vs prime-runs 0.1.4", "", heading + ".", "", f"Run: `{command}`."]
    (args.out / f"{stem}.md").write_text(render_markdown(sections, preamble))
    print(f"\nwrote {args.out / f'{stem}.json'} and {args.out / f'{stem}.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
