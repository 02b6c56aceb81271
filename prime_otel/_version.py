"""The installed distribution's version; a source checkout without metadata falls back to pyproject's."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

_PYPROJECT_VERSION = "0.1.0"

try:
    __version__ = version("prime-otel")
except PackageNotFoundError:
    __version__ = _PYPROJECT_VERSION
