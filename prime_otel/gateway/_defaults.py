"""Defaults shared by the command line and the server (kept free of imports: the CLI loads this eagerly)."""

from __future__ import annotations

DEFAULT_HTTP_PORT = 14318
DEFAULT_GRPC_PORT = 14317
DEFAULT_LEASE_SECONDS = 120.0
DEFAULT_DRAIN_SECONDS = 300.0
DEFAULT_SAMPLES_STEP_INTERVAL = 10
#: Record bytes queued for one run's uploads above which the run answers 503.
DEFAULT_RUN_QUEUED_BYTES = 256 * 1024 * 1024
#: With ``--state-dir``: bytes of one run's spool (records taken, not yet delivered, and GenAI spans awaiting
#: assembly) above which the run answers 503.
DEFAULT_RUN_SPOOL_BYTES = 4 * 1024 * 1024 * 1024
#: Delivery threads shared by every run on a gateway.
DEFAULT_WORKERS = 8
