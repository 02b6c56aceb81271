"""``prime-otel gateway``: both receivers over one run registry, in one process, until SIGTERM/SIGINT."""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._config import resolve_settings, resolve_traces_opt_out
from .._types import SinkPolicy
from ._auth import TOKENS_ENV, Authenticator
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
from ._gc import CollectionPolicy
from ._grpc import start_grpc_server
from ._http import create_app
from ._limits import GatewayLimits
from ._pool import DeliveryPool
from ._registry import RunRegistry
from ._sinks import PipelineFactory, PipelineOptions
from ._state import GatewayState
from ._tls import TlsFiles

_logger = logging.getLogger("prime_otel.gateway")

_READY_WAIT_SECONDS = 30.0
_STOP_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class GatewayOptions:
    host: str = "127.0.0.1"
    http_port: int = DEFAULT_HTTP_PORT
    grpc_port: int = DEFAULT_GRPC_PORT
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    drain_seconds: float = DEFAULT_DRAIN_SECONDS
    sinks: SinkPolicy = "dual"
    samples_step_interval: int = DEFAULT_SAMPLES_STEP_INTERVAL
    api_key: str | None = None
    base_url: str | None = None
    ready_file: Path | None = None
    #: Accepted bearer tokens; empty requires ``allow_anonymous`` (``--no-auth``).
    tokens: tuple[str, ...] = ()
    allow_anonymous: bool = False
    tls: TlsFiles | None = None
    limits: GatewayLimits = field(default_factory=GatewayLimits)
    max_run_queued_bytes: int = DEFAULT_RUN_QUEUED_BYTES
    #: Delivery threads shared by every run.
    workers: int = DEFAULT_WORKERS
    #: Where run state and undelivered records survive a restart (None: in memory only).
    state_dir: Path | None = None
    #: With ``state_dir``: the bound of each run's spool.
    max_run_spool_bytes: int = DEFAULT_RUN_SPOOL_BYTES


def serve(options: GatewayOptions) -> int:
    """Run the gateway until a signal stops it; 2 when it cannot start (no API key, port taken)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # One line per platform request is noise, and presigned upload URLs carry signatures.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    settings = resolve_settings(api_key=options.api_key, base_url=options.base_url)
    if not settings.api_key:
        print("prime-otel gateway: no API key; pass --api-key or set PRIME_API_KEY", file=sys.stderr)
        return 2
    if not options.tokens and not options.allow_anonymous:
        print(
            f"prime-otel gateway: no accepted tokens; pass --token-file or set {TOKENS_ENV} "
            "(or --no-auth to take anonymous senders, for a loopback-only test setup)",
            file=sys.stderr,
        )
        return 2
    authenticator = Authenticator(options.tokens)
    if not authenticator.required:
        _logger.warning("authentication is off (--no-auth): any local process can write into and end any run")
    pipeline_options = PipelineOptions(
        sinks=options.sinks,
        samples_step_interval=options.samples_step_interval,
        traces_opt_out=resolve_traces_opt_out(None, file=settings.file_values),
        max_queued_bytes=options.max_run_queued_bytes,
    )
    pool = DeliveryPool(options.workers)
    state = GatewayState(options.state_dir, options.max_run_spool_bytes) if options.state_dir is not None else None
    registry = RunRegistry(
        PipelineFactory(settings, pipeline_options, pool, state),
        lease_seconds=options.lease_seconds,
        drain_seconds=options.drain_seconds,
        limits=options.limits,
        state=state,
    )
    registry.restore()
    try:
        listener = _listen(options.host, options.http_port)
        grpc_server, grpc_port = start_grpc_server(
            registry, options.host, options.grpc_port, authenticator, options.tls
        )
    except OSError as exc:
        print(f"prime-otel gateway: {exc}", file=sys.stderr)
        return 2
    registry.start()
    import uvicorn

    tls = options.tls
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(registry, authenticator=authenticator),
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
            ssl_certfile=str(tls.cert) if tls is not None else None,
            ssl_keyfile=str(tls.key) if tls is not None else None,
        )
    )
    http_port = listener.getsockname()[1]
    info = {
        "http_url": f"{'https' if tls is not None else 'http'}://{_url_host(options.host)}:{http_port}",
        "http_port": http_port,
        "grpc_endpoint": f"{_url_host(options.host)}:{grpc_port}",
        "grpc_port": grpc_port,
        "pid": os.getpid(),
    }
    threading.Thread(target=_announce_when_started, args=(server, info, options.ready_file), daemon=True).start()
    # uvicorn re-raises the signal that stopped it once it is done; with these handlers that returns here
    # instead of killing the process before the runs drained.
    previous = {sig: signal.signal(sig, _note_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    collection = CollectionPolicy()
    collection.start()
    try:
        server.run(sockets=[listener])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        grpc_server.stop(_STOP_GRACE_SECONDS).wait(_STOP_GRACE_SECONDS)
        registry.stop(options.drain_seconds)
        pool.stop()
        collection.stop()
        if options.ready_file is not None:
            options.ready_file.unlink(missing_ok=True)
    return 0


def _note_signal(signum: int, frame: Any) -> None:
    _logger.info("stopping on %s", signal.Signals(signum).name)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        in_use = exc.errno == errno.EADDRINUSE
        reason = "the port is already in use (--http-port picks another)" if in_use else exc.strerror or str(exc)
        raise OSError(f"could not bind the OTLP/HTTP receiver to {host}:{port}: {reason}") from exc
    listener.listen(1024)
    return listener


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _announce_when_started(server: Any, info: dict[str, Any], ready_file: Path | None) -> None:
    deadline = time.monotonic() + _READY_WAIT_SECONDS
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    if not server.started:
        return
    _logger.info("receiving OTLP/HTTP on %s and OTLP/gRPC on %s", info["http_url"], info["grpc_endpoint"])
    if ready_file is not None:
        partial = ready_file.with_name(ready_file.name + ".partial")
        partial.write_text(json.dumps(info))
        partial.replace(ready_file)
