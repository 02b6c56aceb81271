"""The prime-otel gateway: throughput per gateway process, and the cost per episode of the OTLP path against
in-process export, as ratios.

Run: ``.venv/bin/python benchmarks/bench_gateway.py [--episodes N] [--rounds R] [--runs K] [--fleet 1,2,4]`` (or
``python -m benchmarks --only gateway``). One local platform and gateway subprocesses (``--sinks dual``) on this
machine (2 cores: platform, gateways, Collector and producers share them; the load average at start is printed).

1. Cost per episode (``--rounds`` alternating rounds; CPU figures are medians, the producer ratio is the median of
   the rounds' own ratios, each round's listed): the same eval workload (``benchmarks._child``,
   real verifiers episodes) once with ``transport="direct"`` (the producer uploads) and once with
   ``transport="otlp"`` over gRPC to the gateway. CPU is user+sys: the producer's own (``getrusage``) and the
   gateway process's (``/proc/<pid>/stat``) from before the producer started until the gateway closed the run
   (after one unmeasured run of 50 episodes, so no round pays a fresh gateway's one-time costs).
   Ratios: producer OTLP / direct (what the training or eval loop's process pays) and producer + gateway /
   direct (what the whole path costs).
2. Throughput (once without and once with ``--state-dir``): ``--runs`` runs of ``--episodes`` episodes, pre-encoded
   as OTLP/HTTP protobuf requests of 64 spans (gzip, what a Collector's batch processor sends) before the clock starts,
   posted by 4 threads; the clock stops when the gateway closed every run (all delivered to the platform). Reported:
   episodes per second (wall) and the ceiling one gateway process's CPU allows (episodes per gateway CPU second).
3. Fleet scaling (``--fleet``, needs ``make collector``): ``--fleet-runs`` runs of ``--fleet-episodes`` episodes,
   encoded the same way, sent over OTLP/gRPC by 4 threads to the real agent Collector
   (``collector-config/agent.yaml``: batch, ``load_balancing`` on ``run.id``) in front of 1, 2 and 4 fresh
   gateway processes; the clock stops when every run was closed (all delivered). Reported: episodes per second in
   total and per gateway, gateway and Collector CPU per episode. ``markdown_table`` prints the README's table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import RandomIdGenerator, ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._fleet import collector_built, scale  # noqa: E402
from benchmarks._workload import eval_episodes  # noqa: E402
from prime_otel import _conventions as conv  # noqa: E402
from prime_otel._backends import EvalBackend, RunSpec  # noqa: E402
from prime_otel._types import EnvironmentRef  # noqa: E402
from prime_otel.client import EvaluationsAPI, PlatformHTTP  # noqa: E402
from prime_otel.exporters.otlp import OtlpRecordSink  # noqa: E402
from prime_otel.records import RecordSpan, compact_json  # noqa: E402
from prime_otel.testing import LocalPlatform, start_local_platform  # noqa: E402
from tests.gateway._gateway import Gateway  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
BATCH_SPANS = 64
POSTERS = 4
CHILD_TIMEOUT_SECONDS = 600.0
WARM_UP_EPISODES = 50
_ids = RandomIdGenerator()


def process_cpu_seconds(pid: int) -> float:
    """user + sys of a process (every thread) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_child(platform: LocalPlatform, home: Path, episodes: int, transport_env: dict[str, str]) -> dict[str, Any]:
    inherited = {key: value for key, value in os.environ.items() if not key.startswith(("PRIME_", "OTEL_"))}
    env = {**inherited, **platform.env, "HOME": str(home), **transport_env}
    spec = {"sdk": "ours", "workload": "eval", "episodes": episodes, "sinks": "dual"}
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks._child", json.dumps(spec)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_SECONDS,
        check=False,
    )
    if completed.returncode != 0 or not completed.stdout.strip():
        raise RuntimeError(f"child exited {completed.returncode}:\n{completed.stderr[-3000:]}")
    return dict(json.loads(completed.stdout.strip().splitlines()[-1]))


def stored(platform: LocalPlatform, run_id: str) -> tuple[int, int]:
    snapshot = platform.inspect.run(run_id)
    return snapshot["num_samples"], snapshot["num_episodes"]


def cost_per_episode(
    platform: LocalPlatform, gateway: Gateway, home: Path, episodes: int, rounds: int
) -> dict[str, Any]:
    direct_env = {"PRIME_OTEL_TRANSPORT": "direct"}
    otlp_env = {
        "PRIME_OTEL_TRANSPORT": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{gateway.grpc_endpoint}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
    }
    # A fresh gateway's first run pays its one-time costs (the platform clients' lazy imports, the first
    # connections): one small run goes first, unmeasured, as it would have on a gateway already serving.
    warm = run_child(platform, home, WARM_UP_EPISODES, otlp_env)
    gateway.wait_closed(warm["run_id"], timeout=CHILD_TIMEOUT_SECONDS)
    direct: list[float] = []
    direct_wall: list[float] = []
    producer: list[float] = []
    gateway_cpu: list[float] = []
    for round_number in range(rounds):
        for transport in ("direct", "otlp") if round_number % 2 == 0 else ("otlp", "direct"):
            if transport == "direct":
                result = run_child(platform, home, episodes, direct_env)
                assert stored(platform, result["run_id"]) == (episodes, episodes), "direct export lost records"
                direct.append(result["cpu_s"] / episodes)
                direct_wall.append(result["wall_s"])
                continue
            before = process_cpu_seconds(gateway.process.pid)
            result = run_child(platform, home, episodes, otlp_env)
            status = gateway.wait_closed(result["run_id"], timeout=CHILD_TIMEOUT_SECONDS)
            gateway_cpu.append((process_cpu_seconds(gateway.process.pid) - before) / episodes)
            assert status["status"] == "completed" and stored(platform, result["run_id"]) == (episodes, episodes)
            producer.append(result["cpu_s"] / episodes)
    direct_ms, producer_ms, gateway_ms = (
        statistics.median(values) * 1000 for values in (direct, producer, gateway_cpu)
    )
    # Each round ran both transports back to back: its ratio is the least disturbed by the machine's other load.
    round_ratios = [otlp / plain for otlp, plain in zip(producer, direct, strict=True)]
    return {
        "episodes": episodes,
        "rounds": rounds,
        "direct_producer_cpu_ms_per_episode": direct_ms,
        "otlp_producer_cpu_ms_per_episode": producer_ms,
        "otlp_gateway_cpu_ms_per_episode": gateway_ms,
        "gateway_episodes_per_cpu_second": 1000 / gateway_ms,
        "ratio_producer_otlp_over_direct": statistics.median(round_ratios),
        "round_ratios_producer_otlp_over_direct": round_ratios,
        "rounds_direct_producer_cpu_ms_per_episode": [value * 1000 for value in direct],
        "rounds_otlp_producer_cpu_ms_per_episode": [value * 1000 for value in producer],
        "rounds_gateway_cpu_ms_per_episode": [value * 1000 for value in gateway_cpu],
        "ratio_total_otlp_over_direct": (producer_ms + gateway_ms) / direct_ms,
        "direct_episodes_per_second": episodes / statistics.median(direct_wall),
    }


def create_eval_run(platform: LocalPlatform, name: str) -> str:
    http = PlatformHTTP(api_key=platform.api_key, base_url=platform.url)
    try:
        spec = RunSpec(
            kind="eval",
            name=name,
            environments=[EnvironmentRef.coerce("gsm8k")],
            model="Qwen/Qwen3-8B",
            framework="verifiers",
            description=None,
            tags=[],
            config={},
            team_id=None,
        )
        return EvalBackend(EvaluationsAPI(http)).create(spec).id
    finally:
        http.close()


def _span(name: str, resource: Resource, attributes: dict[str, Any]) -> ReadableSpan:
    now = time.time_ns()
    context = SpanContext(_ids.generate_trace_id(), _ids.generate_span_id(), False, TraceFlags(TraceFlags.SAMPLED))
    return ReadableSpan(
        name=name,
        context=context,
        resource=resource,
        attributes=attributes,
        kind=SpanKind.INTERNAL,
        start_time=now,
        end_time=now,
    )


def encoded_requests(run_id: str, episodes: Sequence[Any], *, gzipped: bool = True) -> tuple[list[bytes], bytes]:
    """The run's episodes as OTLP request bodies of ``BATCH_SPANS`` spans (gzip'd for OTLP/HTTP, raw for gRPC),
    encoded as a ``transport="otlp"`` producer encodes them, and its end marker's body."""
    resource = Resource.create({conv.RUN_ID: run_id, conv.RUN_TYPE: "eval", "service.name": "prime-eval"})
    sink = OtlpRecordSink(InMemorySpanExporter(), resource)
    spans = [RecordSpan(episode, resource, time.time_ns()) for episode in episodes]
    bodies = [sink.encode_request(spans[start : start + BATCH_SPANS]) for start in range(0, len(spans), BATCH_SPANS)]
    marker = _span(
        conv.RUN_END_SPAN,
        resource,
        {
            conv.END_STATUS: "completed",
            conv.END_EPISODES: len(spans),
            conv.END_TRACES: 0,
            conv.END_METRIC_ROWS: 0,
            conv.END_OWNER: True,
            conv.END_SUMMARY_JSON: compact_json({}).decode(),
        },
    )
    marker_body = encode_spans([marker]).SerializeToString()
    if not gzipped:
        return bodies, marker_body
    return [gzip.compress(body, compresslevel=1) for body in bodies], gzip.compress(marker_body)


def throughput(platform: LocalPlatform, gateway: Gateway, runs: int, episodes: int) -> dict[str, Any]:
    prepared = []
    for number in range(runs):
        run_id = create_eval_run(platform, f"bench-gateway-{number}")
        prepared.append((run_id, *encoded_requests(run_id, eval_episodes(episodes))))
    headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
    client = httpx.Client(timeout=120)
    lock = threading.Lock()
    retried = 0

    def post(body: bytes) -> None:
        nonlocal retried
        while True:
            answer = client.post(f"{gateway.http_url}/v1/traces", content=body, headers=headers)
            if answer.status_code != 503:
                answer.raise_for_status()
                return
            with lock:
                retried += 1
            time.sleep(float(answer.headers.get("Retry-After", "1")))

    bodies = [body for _, run_bodies, _ in prepared for body in run_bodies]
    sent_bytes = sum(len(body) for body in bodies)
    cpu_before = process_cpu_seconds(gateway.process.pid)
    started = time.perf_counter()
    with ThreadPoolExecutor(POSTERS) as pool:
        list(pool.map(post, bodies))
        list(pool.map(post, [marker for _, _, marker in prepared]))
    for run_id, _, _ in prepared:
        status = gateway.wait_closed(run_id, timeout=CHILD_TIMEOUT_SECONDS)
        assert status["status"] == "completed" and status["missing"] == 0
    wall = time.perf_counter() - started
    cpu = process_cpu_seconds(gateway.process.pid) - cpu_before
    client.close()
    for run_id, _, _ in prepared:
        landed = stored(platform, run_id)
        assert landed == (episodes, episodes), f"run {run_id} stored {landed} (samples, episodes) of {episodes}"
    total = runs * episodes
    return {
        "runs": runs,
        "episodes": total,
        "gzip_mb_sent": round(sent_bytes / 1e6, 1),
        "wall_s": wall,
        "gateway_cpu_s": cpu,
        "episodes_per_second": total / wall,
        "episodes_per_gateway_cpu_second": total / cpu,
        "gateway_cpu_ms_per_episode": cpu / total * 1000,
        "retried_503": retried,
    }


def fleet_scaling(
    platform: LocalPlatform, home: Path, counts: Sequence[int], runs: int, episodes: int
) -> list[dict[str, Any]]:
    """The same ``runs`` runs through the agent Collector onto 1, 2, 4 ... gateways (fresh runs each time)."""
    rows = []
    for count in counts:
        prepared = []
        for number in range(runs):
            run_id = create_eval_run(platform, f"bench-fleet-{count}-{number}")
            prepared.append((run_id, *encoded_requests(run_id, eval_episodes(episodes), gzipped=False)))
        rows.append(
            scale(
                platform,
                home / f"fleet-{count}",
                count,
                prepared,
                process_cpu_seconds,
                lambda run_id: stored(platform, run_id),
                episodes,
                _platform_pid(platform),
            )
        )
        print(f"  {count} gateway(s): {rows[-1]['episodes_per_second']:.0f} episodes/s", flush=True)
    return rows


def _platform_pid(platform: LocalPlatform) -> int | None:
    process = getattr(platform, "_process", None)  # the local platform's subprocess, when it runs in one
    return process.pid if process is not None else None


def markdown_table(results: dict[str, Any]) -> str:
    """The README's table: the in-process path, one gateway alone, and the Collector fleets, from one run."""
    cost, rate = results["cost"], results["throughput"]
    lines = [
        "| path | gateways (runs on each) | episodes/s (wall) | per gateway | gateway CPU ms/episode "
        "| episodes per gateway CPU s | Collector CPU ms/episode | platform CPU ms/episode |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| direct (in-process upload, one producer) | - | {cost['direct_episodes_per_second']:.0f} "
        "| - | - | - | - | - |",
        f"| OTLP/HTTP straight to one gateway | 1 ({rate['runs']}) | {rate['episodes_per_second']:.0f} | "
        f"{rate['episodes_per_second']:.0f} | {rate['gateway_cpu_ms_per_episode']:.2f} | "
        f"{rate['episodes_per_gateway_cpu_second']:.0f} | - | - |",
    ]
    durable = results.get("throughput_durable")
    if durable is not None:
        lines.append(
            f"| the same, gateway with `--state-dir` (durable state) | 1 ({durable['runs']}) | "
            f"{durable['episodes_per_second']:.0f} | {durable['episodes_per_second']:.0f} | "
            f"{durable['gateway_cpu_ms_per_episode']:.2f} | {durable['episodes_per_gateway_cpu_second']:.0f} | - | - |"
        )
    for row in results.get("fleet", []):
        platform_ms = row.get("platform_cpu_ms_per_episode")
        spread = "/".join(str(count) for count in row["runs_per_gateway"])
        lines.append(
            f"| agent Collector, load balancing on run.id | {row['gateways']} ({spread}) | "
            f"{row['episodes_per_second']:.0f} | {row['episodes_per_second_per_gateway']:.0f} | "
            f"{row['gateway_cpu_ms_per_episode']:.2f} | {1000 / row['gateway_cpu_ms_per_episode']:.0f} | "
            f"{row['collector_cpu_ms_per_episode']:.2f} | "
            f"{'-' if platform_ms is None else format(platform_ms, '.2f')} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--episodes", type=int, default=1000, help="episodes per run (default 1000)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of the cost comparison (default 5)")
    parser.add_argument("--runs", type=int, default=4, help="concurrent runs in the throughput test (default 4)")
    parser.add_argument(
        "--fleet", default="1,2,4", help="gateway counts behind the agent Collector (default 1,2,4; '' skips)"
    )
    parser.add_argument("--fleet-runs", type=int, default=16, help="runs per fleet measurement (default 16)")
    parser.add_argument("--fleet-episodes", type=int, default=250, help="episodes per fleet run (default 250)")
    parser.add_argument("--out", type=Path, default=RESULTS / "gateway.json")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    fleet: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as folder:
        home = Path(folder)
        limits = {"samples_rate_limit": 1_000_000, "metrics_rate_limit": 1_000_000}
        with (
            start_local_platform(home / "platform", processing_delay=0.1, **limits) as platform,
            Gateway(platform, home / "gateway", "--lease-seconds", "120") as gateway,
        ):
            cost = cost_per_episode(platform, gateway, home, args.episodes, args.rounds)
            rate = throughput(platform, gateway, args.runs, args.episodes)
            gateway.stop()
        with (
            start_local_platform(home / "platform-durable", processing_delay=0.1, **limits) as platform,
            Gateway(
                platform, home / "durable", "--lease-seconds", "120", "--state-dir", str(home / "state")
            ) as durable_gateway,
        ):
            durable = throughput(platform, durable_gateway, args.runs, args.episodes)
            durable_gateway.stop()
            counts = [int(count) for count in args.fleet.split(",") if count.strip()]
            if counts and not collector_built():
                print("the Collector is not built (make collector): no fleet scaling", flush=True)
            elif counts:
                fleet = fleet_scaling(platform, home, counts, args.fleet_runs, args.fleet_episodes)
    results: dict[str, Any] = {
        "machine": f"{os.cpu_count()} cores",
        "load_average_at_start": load,
        "cost": cost,
        "throughput": rate,
        "throughput_durable": durable,
    }
    if fleet:
        results["fleet"] = fleet
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"load average at start {load:.2f}; {os.cpu_count()} cores")
    print(
        f"cost per episode (CPU ms, median of {cost['rounds']}): "
        f"direct producer {cost['direct_producer_cpu_ms_per_episode']:.2f} | "
        f"OTLP producer {cost['otlp_producer_cpu_ms_per_episode']:.2f} "
        f"+ gateway {cost['otlp_gateway_cpu_ms_per_episode']:.2f}"
    )
    print(
        f"  ratios: producer OTLP/direct {cost['ratio_producer_otlp_over_direct']:.2f} (median of the rounds: "
        + " / ".join(f"{ratio:.2f}" for ratio in cost["round_ratios_producer_otlp_over_direct"])
        + f"); OTLP total/direct {cost['ratio_total_otlp_over_direct']:.2f}; "
        f"gateway {cost['gateway_episodes_per_cpu_second']:.0f} episodes per CPU second (rounds: "
        + " / ".join(f"{1000 / ms:.0f}" if ms else "-" for ms in cost["rounds_gateway_cpu_ms_per_episode"])
        + ")"
    )
    print(
        f"throughput: {rate['episodes']} episodes over {rate['runs']} runs in {rate['wall_s']:.1f} s = "
        f"{rate['episodes_per_second']:.0f} episodes/s per gateway (wall, platform on the same cores); "
        f"{rate['episodes_per_gateway_cpu_second']:.0f} episodes per gateway CPU second "
        f"({rate['gateway_cpu_ms_per_episode']:.2f} ms/episode); 503 retries: {rate['retried_503']}"
    )
    print(
        f"throughput with --state-dir: {durable['episodes_per_gateway_cpu_second']:.0f} episodes per gateway CPU "
        f"second ({durable['gateway_cpu_ms_per_episode']:.2f} ms/episode); 503 retries: {durable['retried_503']}"
    )
    print(markdown_table(results))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
