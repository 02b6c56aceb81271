"""The static viewer, served without auth from ``prime_otel/local/viewer/`` when it is installed, the dashboard
links the SDK prints (redirected to the viewer's run page), and the viewer's sign-in (``_viewer_login.py``)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from fastapi import FastAPI, Response
from fastapi.responses import FileResponse, RedirectResponse
from starlette.exceptions import HTTPException
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from ._viewer_login import ViewerLogins, viewer_login_router

VIEWER_DIR = Path(__file__).parent / "viewer"

_API_PREFIXES = ("/api/", "/_local/", "/_objects/")


class _ViewerFallback:
    """Answers what no route matched: viewer files for GET, a 404 in the service's shape otherwise.

    Installed as the router's default (not as a mount), so unknown API paths still get their own
    404/405 and trailing-slash redirects keep working.
    """

    def __init__(self, directory: Path) -> None:
        self._files = StaticFiles(directory=directory, html=True) if (directory / "index.html").is_file() else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            self._files is None
            or scope["type"] != "http"
            or scope["method"] not in ("GET", "HEAD")
            or path.startswith(_API_PREFIXES)
            or path in ("/api", "/_local", "/_objects")
        ):
            raise HTTPException(status_code=404, detail="Not Found")
        await self._files(scope, receive, send)


def install_viewer(app: FastAPI, directory: Path = VIEWER_DIR) -> ViewerLogins:
    """Adds the viewer to ``app`` (whose ``state.platform`` is set); returns its sign-in tokens."""
    index = directory / "index.html"
    logins = ViewerLogins(app.state.platform.api_key)
    app.include_router(viewer_login_router(app.state.platform, logins))

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(status_code=204)

    @app.get("/runs/{run_id}", include_in_schema=False)
    def run_page(run_id: str) -> Response:
        # The evaluation's viewer_url: the viewer reads the run id from the location.
        if not index.is_file():
            raise HTTPException(status_code=404, detail="Not Found")
        return FileResponse(index)

    # The frontend links the SDK builds (PRIME_FRONTEND_URL/dashboard/...) open the same run page.
    @app.get("/dashboard/training/{run_id}", include_in_schema=False)
    @app.get("/dashboard/evaluations/{run_id}", include_in_schema=False)
    def dashboard_link(run_id: str) -> Response:
        return RedirectResponse(f"/runs/{quote(run_id, safe='')}", status_code=307)

    app.router.default = _ViewerFallback(directory)
    return logins
