"""The ``prime-otel`` command: ``local`` (the local Prime platform) and ``sync`` (upload an offline run)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prime-otel", description="Prime runs on OpenTelemetry.")
    commands = parser.add_subparsers(dest="command", required=True)

    from .local import _cli as local_cli

    local_cli.add_arguments(commands.add_parser("local", help="serve the local Prime platform"))

    args = parser.parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
