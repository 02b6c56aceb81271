"""Request bodies of the platform API (hub, evaluations, external training runs) and of the local endpoints."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._db import INT64_MAX


class _Body(BaseModel):
    # Unknown keys are tolerated like the platform does; they are not stored.
    model_config = ConfigDict(extra="ignore")


class EnvironmentRef(_Body):
    id: str
    version_id: str | None = None


class HubResolveIn(_Body):
    name: str = Field(min_length=1)
    team_id: str | None = None


class EvaluationCreateIn(_Body):
    name: str
    environments: list[EnvironmentRef] = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    model_name: str | None = None
    dataset: str | None = None
    framework: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None
    team_id: str | None = None


class EvaluationUpdateIn(_Body):
    metadata: dict[str, Any] | None = None
    metrics: dict[str, Any] | None = None
    status: str | None = Field(default=None, description="FAILED or CANCELLED (a terminal status write)")
    error_message: str | None = None


class SamplesIn(_Body):
    samples: list[dict[str, Any]]


class FinalizeIn(_Body):
    metrics: dict[str, Any] = Field(default_factory=dict)


class ExternalRunIn(_Body):
    base_model: str
    max_steps: int = 0
    environments: list[EnvironmentRef]
    team_id: str = Field(min_length=1)
    name: str | None = None
    batch_size: int | None = None
    rollouts_per_example: int | None = None
    seq_len: int | None = None
    run_config: dict[str, Any] | None = None
    wandb_project: str | None = None
    wandb_entity: str | None = None
    wandb_run_name: str | None = None


class RunStatusIn(_Body):
    status: Literal["completed", "failed"]
    error_message: str | None = None


class RftFinalizeIn(_Body):
    run_id: str
    exit_code: int = 0


class RftMetricsIn(_Body):
    run_id: str
    metrics: dict[str, Any]


class PresignIn(_Body):
    run_id: str
    step: int = Field(ge=0, le=INT64_MAX)


class ConfirmIn(_Body):
    run_id: str
    step: int = Field(ge=0, le=INT64_MAX)
    s3_key: str


class PublishEnvironmentIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    owner: str = Field(min_length=1)
    name: str = Field(min_length=1)


class HostedRunIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["train", "eval"]
    name: str | None = None
    team_id: str | None = None
    model: str | None = None
