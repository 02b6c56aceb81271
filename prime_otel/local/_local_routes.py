"""``/_local/``: inspection for the viewer and tests, fault rules, settings, and platform-side actions."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query

from ._context import Platform
from ._db import INT64_MAX
from ._errors import PlatformError, StrictJSONRoute
from ._faults import FaultRuleIn, FaultRulesIn
from ._inspection import Outcome, PageQuery, SortOrder, summarise
from ._models import HostedRunIn, PublishEnvironmentIn
from ._runs import NewRun, Run
from ._settings import SettingsPatch

Offset = Annotated[int, Query(ge=0, le=INT64_MAX)]
Step = Annotated[int, Path(ge=-INT64_MAX, le=INT64_MAX)]
PageLimit = Annotated[int, Query(ge=1, le=1000)]
Sort = Annotated[SortOrder | None, Query(description="reward: lowest first; -reward: highest first; unscored last")]
OutcomeFilter = Annotated[Outcome | None, Query(description="ok: rows without an error; error: rows with one")]
EnvironmentFilter = Annotated[str | None, Query(description="only rows of this environment id")]


def local_router(platform: Platform) -> APIRouter:
    router = APIRouter(
        prefix="/_local",
        route_class=StrictJSONRoute,
        tags=["local"],
        dependencies=[Depends(platform.auth.account)],
    )
    _inspection_routes(router, platform)
    _control_routes(router, platform)
    return router


def _config_source(document: Mapping[str, Any] | None) -> Any:
    value = (document or {}).get("config_source")
    return value if isinstance(value, Mapping) else None


def _environment_ref(env: Any) -> tuple[str | None, str | None]:
    """(id, name) of an ``environments`` entry: a mapping with ``id`` and maybe ``name``, or a bare id."""
    if isinstance(env, Mapping):
        env_id, name = env.get("id"), env.get("name")
        return (str(env_id) if env_id else None, str(name) if name else None)
    return (str(env), None) if env else (None, None)


class _RunViews:
    def __init__(self, platform: Platform) -> None:
        self._platform = platform

    def require(self, run_id: str) -> Run:
        run = self._platform.runs.get(run_id)
        if run is None:
            raise PlatformError(404, f"Run {run_id} not found")
        return run

    def summary(self, run: Run) -> dict[str, Any]:
        num_traces, num_episodes = self._platform.traces.counts(run.id)
        return {
            "id": run.id,
            "kind": run.kind,
            "name": run.name,
            "status": run.status,
            "created_at": run.created_at,
            "model": run.model,
            "num_samples": self._platform.samples.count(run.id),
            "num_episodes": num_episodes,
            "num_traces": num_traces,
        }

    def extended(self, run: Run) -> dict[str, Any]:
        """The list entry plus what a person scans a runs list for: reward, error, tags, environment names."""
        summary = run.summary if isinstance(run.summary, Mapping) else {}
        reported = summary.get("avg_reward")
        reward = reported if isinstance(reported, (int, float)) and not isinstance(reported, bool) else None
        if reward is None:
            index = self._platform.index
            rows = index.records(run.id) or index.samples(run.id)
            reward = summarise(rows, {})["avg_reward"]
        return {
            **self.summary(run),
            "error_message": run.error_message,
            "updated_at": run.updated_at,
            "tags": run.tags,
            "environment_names": self.environment_names(run),
            "avg_reward": reward,
        }

    def environment_names(self, run: Run) -> list[str]:
        """The run's environments by name: hub ids are looked up, names given at creation are kept."""
        refs = [_environment_ref(env) for env in run.environments]
        names = self._platform.index.environment_names(env_id for env_id, _ in refs if env_id)
        return [names.get(env_id or "") or given or env_id or "?" for env_id, given in refs]

    def stats(self, run: Run) -> dict[str, Any]:
        index = self._platform.index
        records, samples = index.records(run.id), index.samples(run.id)
        names = index.environment_names({r.environment_id for r in records} | {s.environment_id for s in samples})
        return {"episodes": summarise(records, names), "samples": summarise(samples, names)}

    def detail(self, run: Run) -> dict[str, Any]:
        platform = self._platform
        config_document = run.metadata if run.kind == "eval" else run.run_config
        return {
            **self.summary(run),
            "error_message": run.error_message,
            "updated_at": run.updated_at,
            "framework": run.framework,
            "team_id": run.team_id,
            "environments": run.environments,
            "tags": run.tags,
            "hosted": run.hosted,
            "metadata": run.metadata if run.kind == "eval" else None,
            "run_config": run.run_config if run.kind == "train" else None,
            "config_source": _config_source(config_document),
            "summary": run.summary if run.kind == "eval" else None,
            "details": run.details,
            "metric_rows": platform.metrics.rows(run.id),
            "objects": platform.objects.confirmed(run.id),
            "requests": platform.requests.counts(run.id),
            "environment_names": self.environment_names(run),
        }


def _inspection_routes(router: APIRouter, platform: Platform) -> None:
    views = _RunViews(platform)

    @router.get("/runs", summary="every run, newest first")
    def list_runs(
        extended: Annotated[bool, Query(description="also error_message, tags, environment names, avg_reward")] = False,
    ) -> list[dict[str, Any]]:
        view = views.extended if extended else views.summary
        return [view(run) for run in platform.runs.all()]

    @router.get("/runs/{run_id}", summary="one run with its documents, metric rows, objects and request counts")
    def get_run(run_id: str) -> dict[str, Any]:
        return views.detail(views.require(run_id))

    @router.get("/runs/{run_id}/stats", summary="reward, error rate, metric means, tokens and environments")
    def run_stats(run_id: str) -> dict[str, Any]:
        return views.stats(views.require(run_id))

    @router.get("/runs/{run_id}/samples", summary="v0 sample rows as stored")
    def run_samples(
        run_id: str,
        offset: Offset = 0,
        limit: PageLimit = 50,
        sort: Sort = None,
        outcome: OutcomeFilter = None,
        environment: EnvironmentFilter = None,
    ) -> dict[str, Any]:
        views.require(run_id)
        query = PageQuery(sort, outcome, environment)
        if query.is_default:
            total, items = platform.samples.page(run_id, offset, limit)
            return {"total": total, "items": items}
        kept = query.apply(platform.index.samples(run_id))
        return {"total": len(kept), "items": platform.index.sample_rows(kept[offset : offset + limit])}

    @router.get("/runs/{run_id}/episodes", summary="episodes (members inline) and bare traces of this run")
    def run_episodes(
        run_id: str,
        offset: Offset = 0,
        limit: PageLimit = 50,
        sort: Sort = None,
        outcome: OutcomeFilter = None,
        environment: EnvironmentFilter = None,
    ) -> dict[str, Any]:
        views.require(run_id)
        query = PageQuery(sort, outcome, environment)
        if query.is_default:
            total, items = platform.traces.records(run_id, offset, limit)
            return {"total": total, "items": items}
        kept = query.apply(platform.index.records(run_id))
        return {"total": len(kept), "items": platform.index.record_docs(kept[offset : offset + limit])}

    @router.get("/runs/{run_id}/episodes/{record_id}", summary="one episode (members inline) or bare trace")
    def run_episode(run_id: str, record_id: str) -> Any:
        views.require(run_id)
        record = platform.index.record(run_id, record_id)
        if record is None:
            raise PlatformError(404, f"Run {run_id} has no episode or trace {record_id}")
        return record

    @router.get("/runs/{run_id}/steps", summary="steps with confirmed sample objects")
    def run_steps(run_id: str) -> list[dict[str, Any]]:
        views.require(run_id)
        return platform.objects.steps(run_id)

    @router.get("/runs/{run_id}/steps/{step}/rows", summary="rows decoded from every confirmed object of a step")
    def step_rows(run_id: str, step: Step, offset: Offset = 0, limit: PageLimit = 50) -> dict[str, Any]:
        views.require(run_id)
        total, items = platform.objects.step_rows(run_id, step, offset, limit)
        return {"total": total, "items": items}

    @router.get("/requests", summary="recorded requests, newest last")
    def recorded_requests(
        limit: Annotated[int, Query(ge=1, le=20_000)] = 200, run_id: str | None = None
    ) -> list[dict[str, Any]]:
        return platform.requests.recent(limit, run_id)


def _control_routes(router: APIRouter, platform: Platform) -> None:
    @router.get("/faults", summary="fault rules with their remaining counts")
    def list_faults() -> list[dict[str, Any]]:
        return platform.faults.rules()

    @router.post("/faults", summary="add one rule, or {'rules': [...]}")
    def add_faults(body: FaultRuleIn | FaultRulesIn) -> list[dict[str, Any]]:
        platform.faults.add(body.rules if isinstance(body, FaultRulesIn) else [body])
        return platform.faults.rules()

    @router.delete("/faults", summary="remove every rule")
    def clear_faults() -> list[dict[str, Any]]:
        platform.faults.clear()
        return []

    @router.get("/settings")
    def get_settings() -> dict[str, Any]:
        return platform.settings.current.to_public()

    @router.post("/settings", summary="change any subset of the settings until the server stops")
    def change_settings(body: SettingsPatch) -> dict[str, Any]:
        return platform.settings.update(body.changes()).to_public()

    @router.post("/environments", summary="publish owner/name so that @latest resolves")
    def publish_environment(body: PublishEnvironmentIn) -> dict[str, Any]:
        return {"id": platform.hub.publish(body.owner, body.name), "owner": body.owner, "name": body.name}

    @router.post("/hosted-runs", status_code=201, summary="a run the platform launched, with its own token")
    def create_hosted_run(body: HostedRunIn) -> dict[str, Any]:
        new = NewRun(
            kind=body.kind,
            name=body.name or f"hosted-{body.kind}-{secrets.token_hex(3)}",
            model=body.model,
            team_id=body.team_id,
            hosted=True,
        )
        run, token = platform.runs.create(new)
        return {"id": run.id, "token": token}
