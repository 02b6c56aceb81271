"""``OTEL_PYTHON_DISTRO=prime``: defaults for ``opentelemetry-instrument`` (needs ``prime-otel[zerocode]``).

Only set-defaults: anything the user exported wins. Logs are off (the upstream distro's OTLP default
would stall exit for ~14 s retrying a Collector that is not there).
"""

from __future__ import annotations

import os
from typing import Any

from opentelemetry.instrumentation.distro import BaseDistro  # type: ignore[attr-defined]

_DEFAULTS = {
    "OTEL_TRACES_EXPORTER": "prime",
    "OTEL_METRICS_EXPORTER": "prime",
    "OTEL_LOGS_EXPORTER": "none",
    "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS": "prime_run",
}


class PrimeDistro(BaseDistro):
    def _configure(self, **kwargs: Any) -> None:
        for name, value in _DEFAULTS.items():
            os.environ.setdefault(name, value)
