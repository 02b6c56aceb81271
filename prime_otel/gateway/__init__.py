"""The prime-otel gateway: an OTLP/HTTP and OTLP/gRPC receiver that runs each received run (by ``run.id``)
through the same processors and exporters as in-process export, and closes it once its producers' ``run.end``
markers and announced records arrived, or its lease ran out. Run it with ``prime-otel gateway``; see README.md.

Names load on first use: the command line imports this package without the ``gateway`` extra's dependencies.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "GatewayOptions": "._server",
    "serve": "._server",
    "RunRegistry": "._registry",
    "Outcome": "._outcome",
    "Saturated": "._outcome",
    "EndMarker": "._ending",
    "EndTracker": "._ending",
    "Ending": "._ending",
    "PipelineFactory": "._sinks",
    "PipelineOptions": "._sinks",
    "create_app": "._http",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
