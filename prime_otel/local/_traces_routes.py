"""Prime Traces on the platform's origin: the upload and the reads a viewer needs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from ._auth import Principal
from ._context import Platform
from ._db import parse_json_leniently
from ._errors import TracesError
from ._ingest import Upload, UploadReader
from ._recorder import note_body, note_runs

#: Uploads up to this size keep their decoded lines in the request log (a client packs many episodes into one
#: upload; the inspection API shows which ones went out in which request).
LINES_CAPTURE_LIMIT = 8 * 1024 * 1024

_UPLOAD_SCHEMA = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["metadata", "traces"],
                    "properties": {
                        "metadata": {"type": "string", "description": '{"schema_version": 1, "context": {...}}'},
                        "traces": {"type": "string", "format": "binary", "description": "JSONL, gzip or raw"},
                    },
                }
            }
        },
    }
}

Limit = Annotated[int, Query(ge=1, le=1000)]


def _only_own_run(principal: Principal, run_ids: set[str]) -> None:
    """A hosted run's token uploads traces for its own run only (the account key for any run)."""
    own = principal.hosted_run_id
    if own is not None and run_ids - {own}:
        raise TracesError(403, "forbidden", "This token may upload traces only for its own run")


def traces_router(platform: Platform) -> APIRouter:
    router = APIRouter(prefix="/api/v1", tags=["traces"])
    Writer = Depends(platform.auth.traces_writer)
    Reader = Depends(platform.auth.traces_reader)

    @router.post("/traces", summary="P1: content-addressed JSONL upload", openapi_extra=_UPLOAD_SCHEMA)
    async def upload_traces(
        request: Request,
        principal: Principal = Writer,
        idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
        line_format: Annotated[str | None, Header(alias="X-Prime-Line-Format")] = None,
        team_id: Annotated[str | None, Header(alias="X-Prime-Team-ID")] = None,
    ) -> dict[str, Any]:
        settings = platform.settings.current
        if not settings.traces_enabled:
            raise TracesError(403, "service_not_enabled", "Prime Traces is not enabled for this account")
        body = await request.body()
        reader = UploadReader(settings)

        def ingest() -> dict[str, Any]:
            upload = reader.read(
                body,
                content_type=request.headers.get("content-type"),
                idempotency_key=idempotency_key,
                line_format=line_format,
                team_id=team_id,
            )
            note_body(request.scope, _recorded_upload(upload))
            receipt = platform.traces.replay(upload.digest, upload.line_format)
            if receipt is None:
                episodes, traces = reader.rows(upload)
                _only_own_run(principal, {row.run_id for row in episodes} | {row.run_id for row in traces})
                receipt = platform.traces.commit(upload, episodes, traces)
            note_runs(request.scope, *platform.traces.run_ids_of_upload(upload.digest))
            return receipt

        return await run_in_threadpool(ingest)

    @router.get("/traces", summary="list traces")
    def list_traces(
        principal: Principal = Reader,
        run_id: str | None = None,
        upload_id: str | None = None,
        environment_id: str | None = None,
        episode_id: str | None = None,
        reward_min: float | None = None,
        reward_max: float | None = None,
        limit: Limit = 100,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        filters = {
            "run_id": run_id,
            "upload_id": upload_id,
            "environment_id": environment_id,
            "episode_id": episode_id,
            "reward_min": reward_min,
            "reward_max": reward_max,
        }
        return platform.traces.list_traces(filters, limit, cursor).to_json()

    @router.get("/traces/{trace_id}", summary="one trace: summary, or the stored document with raw=true")
    def get_trace(trace_id: str, principal: Principal = Reader, raw: bool = False) -> Any:
        if raw:
            return Response(platform.traces.trace(trace_id)["doc"], media_type="application/json")
        return platform.traces.trace_summary(trace_id)

    @router.get("/episodes", summary="list episodes")
    def list_episodes(
        principal: Principal = Reader,
        run_id: str | None = None,
        upload_id: str | None = None,
        environment_id: str | None = None,
        limit: Limit = 100,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        filters = {"run_id": run_id, "upload_id": upload_id, "environment_id": environment_id}
        return platform.traces.list_episodes(filters, limit, cursor).to_json()

    @router.get("/episodes/{episode_id}", summary="one episode; raw=true lists member ids, not inline traces")
    def get_episode(episode_id: str, principal: Principal = Reader, raw: bool = False) -> Any:
        if raw:
            return Response(platform.traces.episode(episode_id)["doc"], media_type="application/json")
        return platform.traces.episode_summary(episode_id)

    @router.get("/runs/{run_id}", summary="run aggregate over the traces whose own run.id is run_id")
    def get_run(run_id: str, principal: Principal = Reader) -> dict[str, Any]:
        return platform.traces.run_summary(run_id)

    return router


def _recorded_upload(upload: Upload) -> dict[str, Any]:
    traces: dict[str, Any] = {
        "part_headers": upload.traces_part_headers,
        "bytes": len(upload.body),
        "line_format": upload.line_format,
    }
    if len(upload.body) <= LINES_CAPTURE_LIMIT:
        traces["jsonl_lines"] = [_decoded(line) for line in upload.body.split(b"\n") if line.strip()]
    return {"metadata": {"json": upload.metadata}, "traces": traces}


def _decoded(line: bytes) -> Any:
    try:
        return parse_json_leniently(line)
    except (ValueError, RecursionError):
        return line.decode("utf-8", errors="replace")
