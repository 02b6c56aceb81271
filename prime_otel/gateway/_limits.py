"""The gateway's bounds: what one sender can make it hold. Past a bound that waiting can lift (open runs, records
queued) the gateway answers 503 + ``Retry-After`` (gRPC ``UNAVAILABLE``), which OTLP senders and the Collector
retry; a resource past a bound that waiting cannot lift (a world size or rank above the cap) is refused in
``partial_success``."""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024
DEFAULT_MAX_WORLD_SIZE = 1024
DEFAULT_MAX_OPEN_RUNS = 256
DEFAULT_MAX_QUEUED_BYTES = 1024 * MIB


@dataclass(frozen=True)
class GatewayLimits:
    #: The largest ``prime.run.world_size`` (and rank + 1) a resource may announce.
    max_world_size: int = DEFAULT_MAX_WORLD_SIZE
    #: Runs open at once; a request that would open one more is answered 503 until one closes.
    max_open_runs: int = DEFAULT_MAX_OPEN_RUNS
    #: Record bytes queued for upload across all runs (each run has its own bound too, ``PipelineOptions``).
    max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES
