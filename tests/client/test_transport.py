"""TLS for the platform clients: an HTTPS platform is verified against the CA bundle, loaded once per process;
a plain-HTTP platform (the local one) loads none, and a redirect from it to HTTPS could not go out unverified."""

from __future__ import annotations

import ssl

from prime_otel.client import transport_for


def _context(url: str | None) -> ssl.SSLContext:
    context = transport_for(url)._pool._ssl_context  # the context httpcore opens TLS connections with
    assert isinstance(context, ssl.SSLContext)
    return context


def test_an_https_platform_is_verified_with_one_ca_bundle_per_process() -> None:
    first, second = _context("https://api.primeintellect.ai"), _context("https://traces.example.com/api/v1")
    assert first is second
    assert first.verify_mode is ssl.CERT_REQUIRED and first.check_hostname
    assert first.cert_store_stats()["x509_ca"] > 0


def test_presigned_storage_urls_get_the_verified_context() -> None:
    assert _context(None) is _context("https://api.primeintellect.ai")


def test_a_plain_http_platform_loads_no_ca_bundle_and_trusts_no_certificate() -> None:
    context = _context("http://127.0.0.1:8787")
    assert context.cert_store_stats()["x509_ca"] == 0
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
