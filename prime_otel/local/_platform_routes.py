"""The platform API: environments hub, evaluations and external training runs.

The same handlers serve the public root ``/api/v1`` (account key) and the internal root
``/api/internal`` (a hosted run's token), where only the calls an attached run makes exist.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from ._auth import Principal
from ._context import Platform
from ._errors import PlatformError, StrictJSONRoute
from ._models import (
    ConfirmIn,
    EvaluationCreateIn,
    EvaluationUpdateIn,
    ExternalRunIn,
    FinalizeIn,
    HubResolveIn,
    PresignIn,
    RftFinalizeIn,
    RftMetricsIn,
    RunStatusIn,
    SamplesIn,
)
from ._recorder import note_runs
from ._runs import EVAL_TERMINAL_STATUSES, NewRun, Run

PUBLIC_ROOT = "/api/v1"
INTERNAL_ROOT = "/api/internal"


def origin_of(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def platform_routers(platform: Platform) -> list[APIRouter]:
    public = APIRouter(prefix=PUBLIC_ROOT, route_class=StrictJSONRoute, tags=["platform"])
    internal = APIRouter(prefix=INTERNAL_ROOT, route_class=StrictJSONRoute, tags=["platform (internal root)"])
    _hub_routes(public, platform)
    _evaluation_create_routes(public, platform)
    _external_run_create_routes(public, platform)
    # A hosted evaluation writes through the public root with its sandbox key; a hosted training
    # run only through the internal root.
    _evaluation_routes(public, platform, platform.auth.account_or_run)
    _evaluation_routes(internal, platform, platform.auth.hosted)
    _rft_routes(public, platform, platform.auth.account)
    _rft_routes(internal, platform, platform.auth.hosted)
    return [public, internal]


class _Access:
    """Which run a caller may touch through which root."""

    def __init__(self, platform: Platform) -> None:
        self._runs = platform.runs

    def evaluation(self, evaluation_id: str, principal: Principal) -> Run:
        run = self._runs.get(evaluation_id)
        if run is None or run.kind != "eval" or not _reachable(run, principal):
            raise PlatformError(404, f"Evaluation {evaluation_id} not found")
        return run

    def training(self, request: Request, run_id: str, principal: Principal) -> Run:
        note_runs(request.scope, run_id)
        run = self._runs.get(run_id)
        if run is None or run.kind != "train" or not _reachable(run, principal):
            raise PlatformError(404, f"Run {run_id} not found")
        if run.hosted and principal.hosted_run_id is None:
            raise PlatformError(400, f"Run {run_id} was launched by the platform; it is managed through its own API")
        return run


def _reachable(run: Run, principal: Principal) -> bool:
    """A hosted run's token reaches that run only."""
    return principal.hosted_run_id is None or principal.hosted_run_id == run.id


def _evaluation_head(run: Run, request: Request) -> dict[str, Any]:
    """The fields an evaluation's create answer and its read share."""
    return {
        "evaluation_id": run.id,
        "name": run.name,
        "status": run.status,
        "eval_type": "environment",
        "viewer_url": f"{origin_of(request)}/runs/{run.id}",
        "created_at": run.created_at,
    }


def _hub_routes(router: APIRouter, platform: Platform) -> None:
    authenticated = Depends(platform.auth.account)

    @router.post("/environmentshub/resolve", summary="E1: get-or-create an environment by (name, team)")
    def resolve_environment(body: HubResolveIn, principal: Principal = authenticated) -> dict[str, Any]:
        return {"data": {"id": platform.hub.resolve(body.name, body.team_id)}}

    @router.get("/environmentshub/{owner}/{name:path}/@latest", summary="E2: latest version of owner/name")
    def latest_environment(owner: str, name: str, principal: Principal = authenticated) -> dict[str, Any]:
        env_id = platform.hub.latest(owner, name)
        if env_id is None:
            raise PlatformError(404, f"Environment {owner}/{name} not found")
        return {"data": {"id": env_id}}


def _evaluation_create_routes(router: APIRouter, platform: Platform) -> None:
    authenticated = Depends(platform.auth.account)
    access = _Access(platform)

    @router.post("/evaluations/", status_code=201, summary="E3: create an evaluation")
    def create_evaluation(
        body: EvaluationCreateIn, request: Request, principal: Principal = authenticated
    ) -> dict[str, Any]:
        new = NewRun(
            kind="eval",
            name=body.name,
            model=body.model_name,
            framework=body.framework,
            team_id=body.team_id,
            environments=[env.model_dump(exclude_none=True) for env in body.environments],
            tags=body.tags,
            metadata=body.metadata,
            details={"dataset": body.dataset, "description": body.description},
        )
        run, _ = platform.runs.create(new)
        note_runs(request.scope, run.id)
        return _evaluation_head(run, request)

    @router.get("/evaluations/{evaluation_id}", summary="read one evaluation")
    def get_evaluation(evaluation_id: str, request: Request, principal: Principal = authenticated) -> dict[str, Any]:
        run = access.evaluation(evaluation_id, principal)
        return {
            **_evaluation_head(run, request),
            "updated_at": run.updated_at,
            "model_name": run.model,
            "dataset": run.details.get("dataset"),
            "framework": run.framework,
            "description": run.details.get("description"),
            "team_id": run.team_id,
            "tags": run.tags,
            "environments": run.environments,
            "metadata": run.metadata,
            "metrics": run.summary,
            "error_message": run.error_message,
            "total_samples": platform.samples.count(run.id),
        }

    @router.get("/evaluations/{evaluation_id}/samples", summary="read samples, page by page (page starts at 1)")
    def get_samples(
        evaluation_id: str,
        principal: Principal = authenticated,
        page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        run = access.evaluation(evaluation_id, principal)
        total, rows = platform.samples.page(run.id, (page - 1) * limit, limit)
        return {"evaluation_id": run.id, "samples": rows, "total": total, "page": page, "limit": limit}


def _evaluation_routes(router: APIRouter, platform: Platform, caller: Callable[..., Principal]) -> None:
    authenticated = Depends(caller)
    access = _Access(platform)

    @router.put("/evaluations/{evaluation_id}", summary="E4 update (metadata/metrics replace) or E5 status")
    def update_evaluation(
        evaluation_id: str, principal: Principal = authenticated, body: EvaluationUpdateIn | None = None
    ) -> dict[str, Any]:
        run = access.evaluation(evaluation_id, principal)
        body = body or EvaluationUpdateIn()
        if body.status is None:
            run = platform.runs.update_eval(run.id, body.metadata, body.metrics)
        else:
            # The internal root and older deployments have no status write at all.
            if principal.hosted_run_id is not None or not platform.settings.current.status_endpoint:
                raise PlatformError(404, "Not Found")
            if body.status not in EVAL_TERMINAL_STATUSES:
                raise PlatformError(422, f"status must be one of {', '.join(EVAL_TERMINAL_STATUSES)}")
            run = platform.runs.close_eval(run.id, body.status, body.error_message, body.metadata, body.metrics)
        return {"evaluation_id": run.id, "name": run.name, "status": run.status, "updated_at": run.updated_at}

    @router.post("/evaluations/{evaluation_id}/samples", summary="E6: append v0 sample rows")
    def push_samples(evaluation_id: str, body: SamplesIn, principal: Principal = authenticated) -> dict[str, Any]:
        run = access.evaluation(evaluation_id, principal)
        settings = platform.settings.current
        platform.limiter.check("samples", principal.token, settings.samples_rate_limit)
        pushed = platform.samples.append(run.id, body.samples)
        return {"evaluation_id": run.id, "samples_pushed": pushed, "status": "RUNNING"}

    @router.post("/evaluations/{evaluation_id}/finalize", summary="E7: RUNNING → PROCESSING → COMPLETED")
    def finalize_evaluation(
        evaluation_id: str, principal: Principal = authenticated, body: FinalizeIn | None = None
    ) -> dict[str, Any]:
        run = access.evaluation(evaluation_id, principal)
        metrics = (body or FinalizeIn()).metrics
        run = platform.runs.finalize_eval(run.id, metrics, platform.settings.current.processing_delay)
        return {"evaluation_id": run.id, "status": run.status}


def _external_run_create_routes(router: APIRouter, platform: Platform) -> None:
    authenticated = Depends(platform.auth.account)
    access = _Access(platform)

    @router.post("/rft/external-runs", status_code=201, summary="T1: create an external training run")
    def create_external_run(
        body: ExternalRunIn, request: Request, principal: Principal = authenticated
    ) -> dict[str, Any]:
        if not platform.settings.current.team_allowed(body.team_id):
            raise PlatformError(403, "External training runs are not enabled for this team")
        details = body.model_dump(
            include={"max_steps", "batch_size", "rollouts_per_example", "seq_len"}
            | {"wandb_project", "wandb_entity", "wandb_run_name"}
        )
        new = NewRun(
            kind="train",
            name=body.name or f"{body.base_model.rsplit('/', 1)[-1].lower()}-run",
            model=body.base_model,
            team_id=body.team_id,
            environments=[env.model_dump(exclude_none=True) for env in body.environments],
            run_config=body.run_config,
            details=details,
        )
        run, _ = platform.runs.create(new)
        note_runs(request.scope, run.id)
        return {"run": {"id": run.id, "name": run.name, "status": run.status}}

    @router.put("/rft/external-runs/{run_id}/status", summary="T2: completed | failed")
    def set_run_status(
        run_id: str, body: RunStatusIn, request: Request, principal: Principal = authenticated
    ) -> dict[str, Any]:
        access.training(request, run_id, principal)
        run = platform.runs.set_train_status(run_id, body.status, body.error_message)
        return {"run": {"id": run.id, "status": run.status}}


def _rft_routes(router: APIRouter, platform: Platform, caller: Callable[..., Principal]) -> None:
    authenticated = Depends(caller)
    access = _Access(platform)

    @router.post("/rft/finalize", summary="T3: compare-and-set RUNNING → COMPLETED")
    def finalize_run(body: RftFinalizeIn, request: Request, principal: Principal = authenticated) -> dict[str, Any]:
        access.training(request, body.run_id, principal)
        message = platform.runs.finalize_train(body.run_id, body.exit_code)
        return {"data": {"status": "success", "message": message}}

    @router.post("/rft/metrics", summary="T4: one row per (run, step), merged on repeat")
    def push_metrics(body: RftMetricsIn, request: Request, principal: Principal = authenticated) -> dict[str, Any]:
        access.training(request, body.run_id, principal)
        platform.limiter.check("metrics", principal.token, platform.settings.current.metrics_rate_limit)
        platform.metrics.write(body.run_id, body.metrics, _step_of(body.metrics))
        return {"data": {"status": "success"}}

    @router.post("/rft/samples/presign", summary="T5: a fresh object key and its upload URL")
    def presign(body: PresignIn, request: Request, principal: Principal = authenticated) -> dict[str, Any]:
        access.training(request, body.run_id, principal)
        ttl = platform.settings.current.presign_ttl
        url, key = platform.objects.presign(body.run_id, body.step, origin_of(request), ttl)
        return {"data": {"presignedUrl": url, "s3Key": key, "expiresIn": ttl}}

    @router.post("/rft/samples/confirm", summary="T7: register an uploaded object for (run, step)")
    def confirm(body: ConfirmIn, request: Request, principal: Principal = authenticated) -> dict[str, Any]:
        access.training(request, body.run_id, principal)
        single = platform.settings.current.object_mode == "single"
        platform.objects.confirm(body.run_id, body.step, body.s3_key, single)
        return {"data": {"status": "success"}}


def _step_of(metrics: dict[str, Any]) -> int | None:
    step = metrics.get("step")
    if step is None:
        return None
    if isinstance(step, float) and step.is_integer():
        return int(step)
    if not isinstance(step, int) or isinstance(step, bool):
        raise PlatformError(422, "metrics.step must be an integer")
    return step
