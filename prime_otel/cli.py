"""The ``prime-otel`` command: ``local`` (the local Prime platform) and ``sync`` (upload an offline run)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ._version import __version__

_PORT_OPTIONS = {"port": "--port", "http_port": "--http-port", "grpc_port": "--grpc-port"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prime-otel", description="Prime runs on OpenTelemetry.")
    parser.add_argument("--version", action="version", version=f"prime-otel {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    from .local import _cli as local_cli

    local_cli.add_arguments(commands.add_parser("local", help="serve the local Prime platform"))

    from .gateway import _cli as gateway_cli

    gateway_cli.add_arguments(commands.add_parser("gateway", help="receive runs over OTLP and deliver them"))

    sync = commands.add_parser(
        "sync", help="upload an offline run, or what an online run kept in its spool; a second sync sends nothing"
    )
    sync.add_argument("folder", help="the run's folder, e.g. ./prime-runs/<run id>")
    sync.add_argument("--api-key", default=None, help="default: PRIME_API_KEY or ~/.prime/config.json")
    recorded = "default: the URL recorded in the run folder, else"
    sync.add_argument("--base-url", default=None, help=f"{recorded} PRIME_API_BASE_URL or ~/.prime/config.json")
    sync.add_argument("--traces-url", default=None, help=f"{recorded} PRIME_TRACES_URL or ~/.prime/config.json")
    sync.add_argument("--frontend-url", default=None, help=f"{recorded} PRIME_FRONTEND_URL or ~/.prime/config.json")
    sync.add_argument(
        "--team-id", default=None, help="default: the team recorded in the run folder, else PRIME_TEAM_ID"
    )
    sync.set_defaults(handler=_sync)

    args = parser.parse_args(argv)
    for attribute, option in _PORT_OPTIONS.items():
        port = getattr(args, attribute, None)
        if port is not None and not 0 <= port <= 65535:
            parser.exit(
                2, f"prime-otel {args.command}: {option} must be from 0 to 65535 (0 picks a free port), got {port}\n"
            )
    return int(args.handler(args) or 0)


def _sync(args: argparse.Namespace) -> int:
    """Exit 0 when everything is delivered, 2 when records may be missing or lines were unreadable, 1 on error,
    130 when interrupted (Ctrl-C or SIGTERM: one line says what was sent and how to resume)."""
    import signal
    import threading

    from .errors import PrimeRunsError, PrimeTracesError
    from .offline import SyncOptions, sync_run_folder
    from .offline._sync import SyncInterrupted

    folder = Path(args.folder)
    if not folder.exists():
        print(f"prime-otel sync: {folder} does not exist", file=sys.stderr)
        return 1
    if not folder.is_dir():
        print(
            f"prime-otel sync: {folder} is not a folder (pass a run's folder, e.g. ./prime-runs/<run id>)",
            file=sys.stderr,
        )
        return 1
    options = SyncOptions(
        api_key=args.api_key,
        base_url=args.base_url,
        traces_url=args.traces_url,
        frontend_url=args.frontend_url,
        team_id=args.team_id,
    )

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, interrupt) if in_main_thread else None
    try:
        result = sync_run_folder(folder, options)
    except SyncInterrupted as exc:
        print(exc.line, file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("prime-otel sync: interrupted before anything was sent", file=sys.stderr)
        return 130
    except PrimeTracesError as exc:
        # A platform answer that stopped the sync: the ledger moved only past what the platform acknowledged.
        print(f"prime-otel sync: {exc}; what was not sent stays in the folder for the next sync", file=sys.stderr)
        return 1
    except PrimeRunsError as exc:
        print(f"prime-otel sync: {exc}", file=sys.stderr)
        return 1
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)
    print(result.render())
    return 0 if result.complete else 2


if __name__ == "__main__":
    sys.exit(main())
