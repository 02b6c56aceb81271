"""``prime-otel local`` / ``python -m prime_otel.local``: options only; the server is imported when run."""

from __future__ import annotations

import argparse
import errno
import socket
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8787, help="port (default 8787; 0 picks a free port)")
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(".prime-otel"),
        help="data directory: platform.sqlite3, objects/, api-key (default ./.prime-otel/)",
    )
    parser.add_argument(
        "--api-key", default=None, help="accepted key (default: generated once, kept in <data>/api-key)"
    )
    parser.add_argument("--traces", choices=("enabled", "disabled"), default="enabled", help="Prime Traces uploads")
    parser.add_argument(
        "--teams", default=None, help="comma-separated teams allowed external training runs (default any)"
    )
    parser.add_argument("--samples-rate-limit", type=int, default=300, help="evaluation samples requests/min per token")
    parser.add_argument("--metrics-rate-limit", type=int, default=60, help="training metrics requests/min per token")
    parser.add_argument("--presign-ttl", type=int, default=900, help="presigned URL lifetime in seconds")
    parser.add_argument(
        "--status-endpoint",
        choices=("present", "absent"),
        default="present",
        help="absent: a status-carrying evaluation PUT answers 404, like older deployments",
    )
    parser.add_argument(
        "--object-mode",
        choices=("additive", "single"),
        default="additive",
        help="single: a later confirm supersedes the earlier objects of that step",
    )
    parser.add_argument(
        "--processing-delay",
        type=float,
        default=0.5,
        help="seconds a finalized evaluation stays PROCESSING before it is COMPLETED",
    )
    parser.add_argument(
        "--ready-file", type=Path, default=None, help='write {"url", "api_key", "pid"} here once listening'
    )
    parser.set_defaults(handler=run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m prime_otel.local", description="Serve the local Prime platform.")
    add_arguments(parser)
    return parser


def _check_can_listen(host: str, port: int) -> None:
    """A taken port is a one-line error naming it, before anything is opened (uvicorn would log a traceback)."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise SystemExit(
                    f"prime-otel local: port {port} on {host} is already in use (another local platform?); "
                    "stop it or choose another with --port"
                ) from None
            raise SystemExit(f"prime-otel local: cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    try:
        import pyarrow.parquet  # noqa: F401  (confirmed training objects are decoded with it)

        from ._server import ServeOptions, serve
        from ._settings import Settings, parse_teams
    except ModuleNotFoundError as missing:
        raise SystemExit(
            f"prime-otel local needs the [local] extra ({missing.name} is not installed): "
            "pip install 'prime-otel[local]'"
        ) from None
    _check_can_listen(args.host, args.port)

    settings = Settings(
        traces_enabled=args.traces == "enabled",
        teams=parse_teams(args.teams),
        status_endpoint=args.status_endpoint == "present",
        object_mode=args.object_mode,
        samples_rate_limit=args.samples_rate_limit,
        metrics_rate_limit=args.metrics_rate_limit,
        presign_ttl=args.presign_ttl,
        processing_delay=args.processing_delay,
    )
    options = ServeOptions(
        data_dir=args.data,
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        ready_file=args.ready_file,
        settings=settings,
    )
    return serve(options)
