"""What an idle open run costs the gateway: memory (RSS) and threads per run held open.

Run: ``.venv/bin/python benchmarks/bench_gateway_idle_runs.py [--runs N] [--workers W]``. One local platform and
one gateway subprocess (``--no-auth``, a lease longer than the measurement). Each run gets one real verifiers
episode over OTLP/HTTP (so its pipeline and sinks are built and have delivered once), then stays open. The
gateway's RSS and thread count (``/proc/<pid>/status``) are read before and after, once every run's record was
delivered; the difference is divided by the number of runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prime_otel.testing import start_local_platform  # noqa: E402
from tests._waiting import wait_for  # noqa: E402
from tests.gateway._gateway import Gateway  # noqa: E402
from tests.gateway._producer import episode_spans, fresh_episodes, run_resource  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def process_status(pid: int) -> tuple[int, int]:
    """RSS in KiB and thread count."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["Threads"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=200, help="idle runs held open (default 200, under the cap)")
    parser.add_argument("--workers", type=int, default=8, help="the gateway's delivery threads (default 8)")
    parser.add_argument("--out", type=Path, default=RESULTS / "gateway_idle_runs.json")
    args = parser.parse_args(argv)
    headers = {"Content-Type": "application/x-protobuf"}
    episode = fresh_episodes("eval", 1)
    with tempfile.TemporaryDirectory(prefix="bench-idle-runs-") as folder:
        home = Path(folder)
        options = ("--lease-seconds", "3600", "--workers", str(args.workers), "--max-open-runs", str(args.runs + 1))
        with (
            start_local_platform(home / "platform") as platform,
            Gateway(platform, home / "gateway", *options) as gateway,
            httpx.Client(timeout=60) as client,
        ):
            warm = encode_spans(episode_spans(episode, run_resource("idle-warm", "eval"))).SerializeToString()
            client.post(f"{gateway.http_url}/v1/traces", content=warm, headers=headers).raise_for_status()
            wait_for(lambda: _delivered(gateway.runs(), ["idle-warm"]), "the warm-up run's delivery")
            time.sleep(1.0)
            rss_before, threads_before = process_status(gateway.process.pid)
            names = [f"idle-{number}" for number in range(args.runs)]
            for name in names:
                body = encode_spans(episode_spans(episode, run_resource(name, "eval"))).SerializeToString()
                client.post(f"{gateway.http_url}/v1/traces", content=body, headers=headers).raise_for_status()
            wait_for(lambda: _delivered(gateway.runs(), names), "every run's delivery", timeout=600)
            time.sleep(1.0)
            rss_after, threads_after = process_status(gateway.process.pid)
    results = {
        "runs": args.runs,
        "workers": args.workers,
        "rss_kib_before": rss_before,
        "rss_kib_after": rss_after,
        "rss_kib_per_idle_run": (rss_after - rss_before) / args.runs,
        "threads_before": threads_before,
        "threads_after": threads_after,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"{args.runs} idle open runs: RSS {rss_before} -> {rss_after} KiB "
        f"({results['rss_kib_per_idle_run']:.0f} KiB per run); threads {threads_before} -> {threads_after}"
    )
    return 0


def _delivered(runs: dict[str, dict[str, object]], names: Sequence[str]) -> bool:
    for name in names:
        sinks = runs.get(name, {}).get("sinks")
        if not isinstance(sinks, dict) or not any(s["delivered"] + s["failed"] for s in sinks.values()):
            return False
    return True


if __name__ == "__main__":
    raise SystemExit(main())
