"""The local Prime platform: the platform API, Prime Traces and object storage on one origin.

Run it with ``prime-otel local`` (or ``python -m prime_otel.local``); see README.md beside this file.
The server modules are imported on first use, so the command line stays quick to start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._app import create_app
    from ._settings import Settings

__all__ = ["Settings", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from ._app import create_app

        return create_app
    if name == "Settings":
        from ._settings import Settings

        return Settings
    raise AttributeError(name)
