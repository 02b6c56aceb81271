"""Base-URL normalisation (an origin or an API root is accepted) and the dashboard links handed to users."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

PUBLIC_API_PATH = "/api/v1"
INTERNAL_API_PATH = "/api/internal"

# Longest first. `/rft` is recognised only after an API path, so a host named `rft` or `api` stays.
_API_SUFFIXES = (
    ("/api/internal/rft", INTERNAL_API_PATH),
    ("/api/internal", INTERNAL_API_PATH),
    ("/api/v1/rft", PUBLIC_API_PATH),
    ("/api/v1", PUBLIC_API_PATH),
)


@dataclass(frozen=True)
class ApiRoot:
    """Where platform requests go: ``origin + api_path + endpoint``."""

    origin: str
    api_path: str

    @property
    def prefix(self) -> str:
        return self.origin + self.api_path

    @property
    def internal(self) -> bool:
        """The internal router that hosted runs reach with their own token."""
        return self.api_path == INTERNAL_API_PATH


def split_api_root(url: str) -> ApiRoot:
    """``(origin, api_path)`` of an origin or API root; only the path is inspected, never the host."""
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/")
    for suffix, api_path in _API_SUFFIXES:
        if path.endswith(suffix):
            origin = urlunsplit((parts.scheme, parts.netloc, path[: -len(suffix)], "", ""))
            return ApiRoot(origin.rstrip("/"), api_path)
    return ApiRoot(url.strip().rstrip("/"), PUBLIC_API_PATH)


def strip_config_url(url: str) -> str:
    """A configured base URL without its trailing ``/`` and then without a trailing ``/api/v1``."""
    return url.strip().rstrip("/").removesuffix("/api/v1")


def normalize_traces_url(url: str) -> str:
    """The Prime Traces origin; uploads go to ``<origin>/api/v1/traces``, so that suffix is dropped too."""
    return strip_config_url(url.strip().rstrip("/").removesuffix("/api/v1/traces"))


def path_segment(value: str) -> str:
    """One URL path segment: an id containing ``/`` or ``?`` must not reroute the request."""
    return quote(value, safe="")


def eval_dashboard_url(frontend: str, evaluation_id: str) -> str:
    return f"{frontend.rstrip('/')}/dashboard/evaluations/{path_segment(evaluation_id)}"


def training_dashboard_url(frontend: str, run_id: str) -> str:
    return f"{frontend.rstrip('/')}/dashboard/training/{path_segment(run_id)}"
