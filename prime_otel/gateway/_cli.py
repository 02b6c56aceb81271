"""``prime-otel gateway``: options only; the receivers are imported when run."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import MissingExtraError
from ._defaults import (
    DEFAULT_DRAIN_SECONDS,
    DEFAULT_GRPC_PORT,
    DEFAULT_HTTP_PORT,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_RUN_QUEUED_BYTES,
    DEFAULT_RUN_SPOOL_BYTES,
    DEFAULT_SAMPLES_STEP_INTERVAL,
    DEFAULT_WORKERS,
)
from ._limits import DEFAULT_MAX_OPEN_RUNS, DEFAULT_MAX_QUEUED_BYTES, DEFAULT_MAX_WORLD_SIZE, MIB


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--http-port", type=int, default=DEFAULT_HTTP_PORT, help=f"OTLP/HTTP port (default {DEFAULT_HTTP_PORT}; 0: any)"
    )
    parser.add_argument(
        "--grpc-port", type=int, default=DEFAULT_GRPC_PORT, help=f"OTLP/gRPC port (default {DEFAULT_GRPC_PORT}; 0: any)"
    )
    parser.add_argument(
        "--lease-seconds",
        type=float,
        default=DEFAULT_LEASE_SECONDS,
        help=f"a run with no data and no end marker for this long is closed (default {DEFAULT_LEASE_SECONDS:g})",
    )
    parser.add_argument(
        "--drain-seconds",
        type=float,
        default=DEFAULT_DRAIN_SECONDS,
        help=f"upload budget when a run closes (default {DEFAULT_DRAIN_SECONDS:g})",
    )
    parser.add_argument(
        "--sinks",
        choices=("dual", "traces", "legacy"),
        default="dual",
        help="dual: Prime Traces and the legacy tables; traces: Prime Traces, legacy only outside its beta; "
        "legacy: the legacy tables only (default dual)",
    )
    parser.add_argument(
        "--samples-step-interval",
        type=int,
        default=DEFAULT_SAMPLES_STEP_INTERVAL,
        help=f"training runs: upload the Parquet samples of every n-th step (default {DEFAULT_SAMPLES_STEP_INTERVAL})",
    )
    parser.add_argument("--api-key", default=None, help="default: PRIME_API_KEY or ~/.prime/config.json")
    parser.add_argument("--base-url", default=None, help="default: PRIME_API_BASE_URL or ~/.prime/config.json")
    parser.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_WORKERS,
        help=f"delivery threads shared by every run (default {DEFAULT_WORKERS})",
    )
    parser.add_argument(
        "--max-world-size",
        type=int,
        default=DEFAULT_MAX_WORLD_SIZE,
        help=f"refuse resources announcing a larger world size or rank (default {DEFAULT_MAX_WORLD_SIZE})",
    )
    parser.add_argument(
        "--max-open-runs",
        type=int,
        default=DEFAULT_MAX_OPEN_RUNS,
        help=f"answer 503 to data opening one more run (default {DEFAULT_MAX_OPEN_RUNS})",
    )
    parser.add_argument(
        "--max-queued-mib",
        type=int,
        default=DEFAULT_MAX_QUEUED_BYTES // MIB,
        help=f"answer 503 past this many MiB of records queued across runs (default {DEFAULT_MAX_QUEUED_BYTES // MIB})",
    )
    parser.add_argument(
        "--max-run-queued-mib",
        type=int,
        default=DEFAULT_RUN_QUEUED_BYTES // MIB,
        help=f"answer 503 past this many MiB queued for one run (default {DEFAULT_RUN_QUEUED_BYTES // MIB})",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="keep run state and undelivered records here, so a restarted gateway takes its runs up again",
    )
    parser.add_argument(
        "--max-run-spool-mib",
        type=int,
        default=DEFAULT_RUN_SPOOL_BYTES // MIB,
        help="with --state-dir: answer 503 past this many MiB in one run's spool, its records not yet delivered "
        f"and GenAI spans awaiting assembly (default {DEFAULT_RUN_SPOOL_BYTES // MIB})",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        default=None,
        help="accepted bearer tokens, one per line; also the comma-separated list in PRIME_OTEL_GATEWAY_TOKENS",
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="take requests without a token (a loopback test setup only: anyone local can end any run)",
    )
    parser.add_argument("--tls-cert", type=Path, default=None, help="PEM certificate chain: both receivers on TLS")
    parser.add_argument("--tls-key", type=Path, default=None, help="PEM private key of --tls-cert")
    parser.add_argument(
        "--ready-file",
        type=Path,
        default=None,
        help='write {"http_url", "http_port", "grpc_endpoint", "grpc_port", "pid"} here once listening',
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn  # noqa: F401  (serve imports it late; a missing extra must fail before anything starts)

        from ._auth import load_tokens
        from ._limits import GatewayLimits
        from ._server import GatewayOptions, serve
        from ._tls import TlsFiles
    except ModuleNotFoundError as missing:
        raise SystemExit(str(MissingExtraError("prime-otel gateway", "gateway", missing))) from None

    if args.samples_step_interval < 1:
        raise SystemExit("prime-otel gateway: --samples-step-interval must be at least 1")
    for name in (
        "workers",
        "max_world_size",
        "max_open_runs",
        "max_queued_mib",
        "max_run_queued_mib",
        "max_run_spool_mib",
    ):
        if getattr(args, name) < 1:
            raise SystemExit(f"prime-otel gateway: --{name.replace('_', '-')} must be at least 1")
    try:
        tokens = load_tokens(args.token_file)
        tls = TlsFiles.of(args.tls_cert, args.tls_key)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"prime-otel gateway: {exc}") from None
    return serve(
        GatewayOptions(
            host=args.host,
            http_port=args.http_port,
            grpc_port=args.grpc_port,
            lease_seconds=args.lease_seconds,
            drain_seconds=args.drain_seconds,
            sinks=args.sinks,
            samples_step_interval=args.samples_step_interval,
            api_key=args.api_key,
            base_url=args.base_url,
            ready_file=args.ready_file,
            tokens=tuple(tokens),
            allow_anonymous=args.no_auth,
            tls=tls,
            limits=GatewayLimits(
                max_world_size=args.max_world_size,
                max_open_runs=args.max_open_runs,
                max_queued_bytes=args.max_queued_mib * MIB,
            ),
            max_run_queued_bytes=args.max_run_queued_mib * MIB,
            workers=args.workers,
            state_dir=args.state_dir,
            max_run_spool_bytes=args.max_run_spool_mib * MIB,
        )
    )
