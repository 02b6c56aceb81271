"""Who may send to the gateway: bearer tokens, compared in constant time, and the sender each token names.

A sender is named by a fingerprint of its token (never the token itself, which is never logged or shown). A run
is bound to the sender whose request opened it on this gateway; requests under another token cannot write to it,
end it or see it in ``/runs``. Without tokens (``--no-auth``) every request is the one sender ``anonymous``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

TOKENS_ENV = "PRIME_OTEL_GATEWAY_TOKENS"
ANONYMOUS = "anonymous"
_SCHEME = "bearer"


class AuthError(Exception):
    """A request without an accepted bearer token (HTTP 401, gRPC ``UNAUTHENTICATED``)."""


class Authenticator:
    """The accepted tokens; ``sender`` names the one a request's ``authorization`` value carries."""

    def __init__(self, tokens: Iterable[str] = ()) -> None:
        accepted = [token.strip() for token in tokens if token.strip()]
        self._tokens = [(token.encode("utf-8"), fingerprint(token)) for token in accepted]

    @property
    def required(self) -> bool:
        return bool(self._tokens)

    def sender(self, authorization: str | None) -> str:
        """The sender behind ``authorization`` (``Bearer <token>``); ``AuthError`` when no accepted token is in it."""
        if not self._tokens:
            return ANONYMOUS
        scheme, _, credential = (authorization or "").strip().partition(" ")
        if scheme.lower() != _SCHEME or not credential.strip():
            raise AuthError("send an accepted token as 'authorization: Bearer <token>'")
        offered = credential.strip().encode("utf-8", "surrogatepass")
        found = None
        for token, name in self._tokens:
            # Every token is compared, so the time taken does not tell which one nearly matched.
            if hmac.compare_digest(token, offered):
                found = name
        if found is None:
            raise AuthError("the bearer token is not accepted by this gateway")
        return found


def fingerprint(token: str) -> str:
    return "token-" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:12]


def load_tokens(token_file: Path | None, environ: dict[str, str] | None = None) -> list[str]:
    """The accepted tokens: one per line of ``token_file`` (``#`` comments), plus the comma-separated list in
    ``PRIME_OTEL_GATEWAY_TOKENS``."""
    env = os.environ if environ is None else environ
    tokens: list[str] = []
    if token_file is not None:
        for line in token_file.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                tokens.append(line)
    tokens.extend(part.strip() for part in env.get(TOKENS_ENV, "").split(",") if part.strip())
    return _unique(tokens)


def _unique(tokens: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(tokens))
