"""Base-URL normalisation (origin or API root; config values lose a trailing / and /api/v1) and dashboard links."""

from __future__ import annotations

import pytest

from prime_otel.client import (
    ApiRoot,
    eval_dashboard_url,
    normalize_traces_url,
    split_api_root,
    strip_config_url,
    training_dashboard_url,
)


@pytest.mark.parametrize(
    ("url", "origin", "api_path"),
    [
        ("https://x", "https://x", "/api/v1"),
        ("https://x/api/v1/", "https://x", "/api/v1"),
        ("https://x/prefix/api/v1?q=1#f", "https://x/prefix", "/api/v1"),
        ("https://x/api/v1/rft", "https://x", "/api/v1"),
        ("https://x/api/internal/rft/", "https://x", "/api/internal"),
        ("https://x/api/internal", "https://x", "/api/internal"),
        ("https://x/api", "https://x/api", "/api/v1"),
        ("https://x/", "https://x", "/api/v1"),
    ],
)
def test_split_api_root_contract_table(url: str, origin: str, api_path: str) -> None:
    assert split_api_root(url) == ApiRoot(origin, api_path)


@pytest.mark.parametrize("host", ["https://api", "https://rft", "http://api.internal:8080"])
def test_split_api_root_never_rewrites_the_host(host: str) -> None:
    assert split_api_root(host).origin == host
    assert split_api_root(f"{host}/api/v1/rft").origin == host


def test_api_root_prefix_and_internal_flag() -> None:
    public = split_api_root("https://x/api/v1")
    internal = split_api_root("https://x/api/internal/rft")
    assert public.prefix == "https://x/api/v1" and not public.internal
    assert internal.prefix == "https://x/api/internal" and internal.internal


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://x/api/v1/", "https://x"),
        ("https://x/api/v1", "https://x"),
        ("https://x/", "https://x"),
        ("https://x/api/internal/rft", "https://x/api/internal/rft"),
    ],
)
def test_strip_config_url(url: str, expected: str) -> None:
    assert strip_config_url(url) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://localhost:8083", "http://localhost:8083"),
        ("http://localhost:8083/", "http://localhost:8083"),
        ("https://api.primeintellect.ai/api/v1", "https://api.primeintellect.ai"),
        ("https://api.primeintellect.ai/api/v1/traces/", "https://api.primeintellect.ai"),
    ],
)
def test_normalize_traces_url(url: str, expected: str) -> None:
    assert normalize_traces_url(url) == expected


def test_dashboard_urls() -> None:
    assert eval_dashboard_url("https://app.x/", "eval-1") == "https://app.x/dashboard/evaluations/eval-1"
    assert training_dashboard_url("https://app.x", "cmf0") == "https://app.x/dashboard/training/cmf0"
