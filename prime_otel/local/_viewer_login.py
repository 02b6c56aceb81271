"""Signing a browser in to the viewer without printing the API key.

``prime-otel local`` and ``make demo`` print a one-time sign-in link (``/_viewer/login?token=...``) instead of the
key. Opening it sets an HttpOnly, SameSite=Strict cookie derived from the key (an HMAC, so it survives a restart
on the same data and dies with a new key), and every viewer page of that browser then fetches the key from
``/_viewer/session`` into its tab: the run links the SDK prints open directly. A used or expired link
signs nobody in; the key form explains why. Tokens are minted by the server for its banner, or by an API-key
holder with ``POST /_viewer/logins``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse

from ._context import Platform

COOKIE = "prime_otel_viewer"
LOGIN_PATH = "/_viewer/login"
TOKEN_SECONDS = 24 * 3600
_COOKIE_SECONDS = 30 * 24 * 3600
_SESSION_CONTEXT = b"prime-otel local viewer session"


class ViewerLogins:
    """One-time sign-in tokens, kept in memory until used or expired."""

    def __init__(self, api_key: str, lifetime: float = TOKEN_SECONDS) -> None:
        self._session = hmac.new(api_key.encode(), _SESSION_CONTEXT, hashlib.sha256).hexdigest()
        self._lifetime = lifetime
        self._expiry: dict[str, float] = {}
        self._lock = threading.Lock()

    def issue(self) -> str:
        token = secrets.token_urlsafe(24)
        now = time.monotonic()
        with self._lock:
            self._expiry = {known: expiry for known, expiry in self._expiry.items() if expiry > now}
            self._expiry[token] = now + self._lifetime
        return token

    def redeem(self, token: str) -> bool:
        with self._lock:
            expiry = self._expiry.pop(token, None)
        return expiry is not None and expiry > time.monotonic()

    @property
    def session(self) -> str:
        """The cookie value a signed-in browser holds."""
        return self._session

    def signed_in(self, request: Request) -> bool:
        presented = request.cookies.get(COOKIE, "")
        return hmac.compare_digest(presented.encode(), self._session.encode())


def login_path(token: str) -> str:
    return f"{LOGIN_PATH}?token={quote(token)}"


def _safe_next(target: str | None) -> str:
    """Only a path on this origin: never ``//host`` or a scheme, so the link cannot send the browser elsewhere."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def viewer_login_router(platform: Platform, logins: ViewerLogins) -> APIRouter:
    router = APIRouter(prefix="/_viewer", include_in_schema=False)
    no_store = {"Cache-Control": "no-store"}

    @router.post("/logins", status_code=201, dependencies=[Depends(platform.auth.account)])
    def issue_login() -> dict[str, Any]:
        token = logins.issue()
        return {"token": token, "path": login_path(token), "expires_in": TOKEN_SECONDS}

    @router.get("/login")
    def login(token: str = "", next: str | None = None) -> Response:
        if not logins.redeem(token):
            return RedirectResponse("/?signin=expired", status_code=303, headers=no_store)
        response = RedirectResponse(_safe_next(next), status_code=303, headers=no_store)
        response.set_cookie(COOKIE, logins.session, max_age=_COOKIE_SECONDS, path="/", httponly=True, samesite="strict")
        return response

    @router.get("/session")
    def session(request: Request) -> Response:
        if not logins.signed_in(request):
            return JSONResponse({"detail": "not signed in"}, status_code=401, headers=no_store)
        return JSONResponse({"api_key": platform.api_key}, headers=no_store)

    @router.post("/logout", status_code=204)
    def logout() -> Response:
        response = Response(status_code=204, headers=no_store)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    return router
