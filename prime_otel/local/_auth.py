"""Who is calling: the account API key, or a hosted run's own token (internal root and traces writes)."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Depends, Security
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from ._errors import PlatformError, TracesError

_bearer = HTTPBearer(auto_error=False, description="the account API key (or a hosted run's token)")
_api_key = APIKeyHeader(name="x-api-key", auto_error=False, description="same credential, internal-root style")
_BEARER = Security(_bearer)
_API_KEY = Security(_api_key)


def presented_tokens(
    bearer: HTTPAuthorizationCredentials | None = _BEARER,
    api_key: str | None = _API_KEY,
) -> list[str]:
    tokens = [bearer.credentials] if bearer is not None else []
    if api_key:
        tokens.append(api_key)
    return tokens


_TOKENS = Depends(presented_tokens)


@dataclass(frozen=True)
class Principal:
    token: str
    hosted_run_id: str | None = None


class Authenticator:
    def __init__(self, api_key: str, hosted_run_for_token: Callable[[str], str | None]) -> None:
        self._api_key = api_key
        self._hosted_run_for_token = hosted_run_for_token

    def _identify(self, tokens: list[str]) -> Principal | None:
        for token in tokens:
            if hmac.compare_digest(token.encode(), self._api_key.encode()):
                return Principal(token)
        for token in tokens:
            run_id = self._hosted_run_for_token(token)
            if run_id is not None:
                return Principal(token, run_id)
        return None

    def account(self, tokens: list[str] = _TOKENS) -> Principal:
        """Public platform API and ``/_local/``: the account key only."""
        principal = self._identify(tokens)
        if principal is None or principal.hosted_run_id is not None:
            raise PlatformError(401, "Invalid or missing API key")
        return principal

    def account_or_run(self, tokens: list[str] = _TOKENS) -> Principal:
        """Public evaluation writes: the account key, or a hosted evaluation's own (sandbox) key."""
        principal = self._identify(tokens)
        if principal is None:
            raise PlatformError(401, "Invalid or missing API key")
        return principal

    def hosted(self, tokens: list[str] = _TOKENS) -> Principal:
        """Internal root: a hosted run's own token."""
        principal = self._identify(tokens)
        if principal is None or principal.hosted_run_id is None:
            raise PlatformError(401, "Invalid or missing run token")
        return principal

    def traces_writer(self, tokens: list[str] = _TOKENS) -> Principal:
        principal = self._identify(tokens)
        if principal is None:
            raise TracesError(401, "unauthenticated", "Missing or invalid API key")
        return principal

    def traces_reader(self, tokens: list[str] = _TOKENS) -> Principal:
        principal = self.traces_writer(tokens)
        if principal.hosted_run_id is not None:
            raise TracesError(403, "forbidden", "This token may upload traces but not read them")
        return principal
