"""httpx transports for the platform clients. httpx loads the whole CA bundle for every client it builds
(tens of milliseconds of CPU each); here it is loaded once per process, and not at all for a plain-HTTP
platform such as the local one."""

from __future__ import annotations

import functools
import ssl
from urllib.parse import urlsplit

import httpx


@functools.cache
def _verified_tls() -> ssl.SSLContext:
    return httpx.create_ssl_context()


@functools.cache
def _no_trust_anchors() -> ssl.SSLContext:
    # Verifies like any client context but trusts no certificate: a redirect from a plain-HTTP platform to
    # HTTPS fails verification instead of going out unverified.
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def transport_for(url: str | None) -> httpx.HTTPTransport:
    """A transport for requests to ``url``'s host; without a URL (presigned storage URLs), one ready for TLS."""
    plain_http = url is not None and urlsplit(url).scheme == "http"
    return httpx.HTTPTransport(verify=_no_trust_anchors() if plain_http else _verified_tls())
