"""Serving the app with uvicorn: the start banner, the ready file, and the hook ``reset_after`` needs."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn

from ._app import build_app
from ._context import Platform
from ._datadir import DataDir
from ._faults import ConnectionRegistry
from ._settings import Settings
from ._viewer_login import login_path


@dataclass(frozen=True)
class ServeOptions:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 8787
    api_key: str | None = None
    ready_file: Path | None = None
    settings: Settings = field(default_factory=Settings)


def origin(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class _Server(uvicorn.Server):
    def __init__(
        self, config: uvicorn.Config, connections: ConnectionRegistry, on_ready: Callable[[int], None]
    ) -> None:
        super().__init__(config)
        self._connections = connections
        self._on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self._connections.attach(self.server_state.connections)
        port = self.servers[0].sockets[0].getsockname()[1]
        self._on_ready(int(port))


def _write_ready_file(path: Path, url: str, api_key: str) -> None:
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"url": url, "api_key": api_key, "pid": os.getpid()}, handle)
    os.replace(partial, path)


def serve(options: ServeOptions) -> int:
    """Serves until SIGINT/SIGTERM; returns the exit status."""
    data = DataDir(options.data_dir.resolve())
    api_key = data.api_key(options.api_key)
    platform = Platform.open(data, api_key, options.settings)

    app = build_app(platform)

    def ready(port: int) -> None:
        url = origin(options.host, port)
        # The key is never printed: the viewer link signs one browser in once (see _viewer_login.py).
        signin = login_path(app.state.viewer_logins.issue())
        print(f"Prime local platform: {url}  (viewer: {url}{signin})", flush=True)
        key_source = "the key given with --api-key" if options.api_key else f"API key in {data.root / 'api-key'}"
        print(f"Data directory: {data.root}  ({key_source})", flush=True)
        if options.ready_file is not None:
            _write_ready_file(options.ready_file, url, api_key)

    config = uvicorn.Config(
        app,
        host=options.host,
        port=options.port,
        http="h11",
        lifespan="off",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    server = _Server(config, platform.connections, ready)
    # uvicorn re-raises a captured SIGINT after its graceful shutdown; Ctrl-C is a normal stop.
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    return 0 if server.started else 1


def main() -> None:
    from ._cli import build_parser

    args = build_parser().parse_args()
    if not 0 <= args.port <= 65535:
        sys.exit(f"python -m prime_otel.local: --port must be from 0 to 65535 (0 picks a free port), got {args.port}")
    sys.exit(args.handler(args))
