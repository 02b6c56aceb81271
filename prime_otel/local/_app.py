"""The ASGI application: every route on one origin, wrapped by the recorder, fault injection and body caps."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from ._bodylimit import BodyLimitMiddleware
from ._context import Platform
from ._datadir import DataDir
from ._errors import install_error_handlers
from ._faults import FaultMiddleware
from ._local_routes import local_router
from ._objects_routes import objects_router
from ._platform_routes import platform_routers
from ._recorder import RecorderMiddleware
from ._settings import Settings
from ._traces_routes import traces_router
from ._viewer import install_viewer


def build_app(platform: Platform) -> FastAPI:
    app = FastAPI(
        title="Prime local platform",
        description="The Prime platform API, Prime Traces and object storage on one local origin.",
        version="1",
        redoc_url=None,
    )
    app.state.platform = platform
    install_error_handlers(app)
    for router in platform_routers(platform):
        app.include_router(router)
    app.include_router(traces_router(platform))
    app.include_router(objects_router(platform))
    app.include_router(local_router(platform))
    app.state.viewer_logins = install_viewer(app)
    # Added innermost first: the recorder sees what the client saw, faults included.
    app.add_middleware(BodyLimitMiddleware, settings=platform.settings)
    app.add_middleware(FaultMiddleware, book=platform.faults, connections=platform.connections)
    app.add_middleware(RecorderMiddleware, log=platform.requests)
    return app


def create_app(data_dir: str | Path, *, api_key: str | None = None, settings: Settings | None = None) -> FastAPI:
    """An app over ``data_dir``; ``app.state.platform.api_key`` is the key it accepts."""
    data = DataDir(Path(data_dir))
    return build_app(Platform.open(data, data.api_key(api_key), settings or Settings()))
