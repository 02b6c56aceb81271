"""The storage side of presigned URLs: ``PUT /_objects/<key>?expires=…&signature=…`` (no API key)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from ._context import Platform
from ._recorder import note_runs

_OBJECT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/parquet": {"schema": {"type": "string", "format": "binary"}}},
    }
}


def objects_router(platform: Platform) -> APIRouter:
    router = APIRouter(tags=["object storage"])

    @router.put("/_objects/{key:path}", summary="T6: store the bytes of a presigned key", openapi_extra=_OBJECT_BODY)
    async def put_object(
        key: str,
        request: Request,
        expires: Annotated[str | None, Query()] = None,
        signature: Annotated[str | None, Query()] = None,
    ) -> Response:
        # A forged or expired URL is refused before a byte of its body is read (object storage does the same).
        await run_in_threadpool(platform.objects.authorize_put, key, expires, signature)
        body = await request.body()
        etag = await run_in_threadpool(platform.objects.put, key, expires, signature, body)
        run_id = await run_in_threadpool(platform.objects.run_of, key)
        if run_id is not None:
            note_runs(request.scope, run_id)
        return Response(status_code=200, headers={"ETag": f'"{etag}"'})

    return router
