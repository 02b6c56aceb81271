"""``OTEL_PYTHON_DISTRO=prime``: defaults for ``opentelemetry-instrument`` (needs ``prime-otel[zerocode]``).

Only set-defaults: anything the user exported wins. Logs are off (the upstream distro's OTLP default
would stall exit for ~14 s retrying a Collector that is not there).

With ``PRIME_OTEL_AS_PRIME_RUNS=1`` the producer is an unmodified prime-runs one: the ``prime_runs`` import shim
(:mod:`prime_otel.compat`) is installed before the program starts, the producer's own ``prime_runs.init()``
opens its run, and no zero-code run is opened from the environment (span and metric exporters default to none).
"""

from __future__ import annotations

import os
from typing import Any

from opentelemetry.instrumentation.distro import BaseDistro  # type: ignore[attr-defined]

from . import compat

_DEFAULTS = {
    "OTEL_TRACES_EXPORTER": "prime",
    "OTEL_METRICS_EXPORTER": "prime",
    "OTEL_LOGS_EXPORTER": "none",
    "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS": "prime_run",
}
_AS_PRIME_RUNS_DEFAULTS = {**_DEFAULTS, "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}


class PrimeDistro(BaseDistro):
    def _configure(self, **kwargs: Any) -> None:
        defaults = _AS_PRIME_RUNS_DEFAULTS if compat.install_if_requested() else _DEFAULTS
        for name, value in defaults.items():
            os.environ.setdefault(name, value)
