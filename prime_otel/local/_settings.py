"""Server behaviour switches: set at start from the command line, changeable at runtime by tests."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MIB = 1024 * 1024

ObjectMode = Literal["additive", "single"]


@dataclass(frozen=True)
class Settings:
    """One immutable snapshot; a change swaps the whole snapshot so a request never sees half of one."""

    traces_enabled: bool = True
    teams: frozenset[str] | None = None
    status_endpoint: bool = True
    object_mode: ObjectMode = "additive"
    samples_rate_limit: int = 300
    metrics_rate_limit: int = 60
    presign_ttl: int = 900
    processing_delay: float = 0.5
    samples_max_bytes: int = 25 * MIB
    traces_max_upload_bytes: int = 256 * MIB
    traces_max_line_bytes: int = 64 * MIB
    traces_max_lines: int = 1_000_000
    traces_max_per_episode: int = 1024
    traces_max_id_length: int = 256

    def team_allowed(self, team_id: str) -> bool:
        return self.teams is None or team_id in self.teams

    def to_public(self) -> dict[str, Any]:
        return {
            "traces": "enabled" if self.traces_enabled else "disabled",
            "teams": sorted(self.teams) if self.teams is not None else None,
            "status_endpoint": "present" if self.status_endpoint else "absent",
            "object_mode": self.object_mode,
            "samples_rate_limit": self.samples_rate_limit,
            "metrics_rate_limit": self.metrics_rate_limit,
            "presign_ttl": self.presign_ttl,
            "processing_delay": self.processing_delay,
            "samples_max_bytes": self.samples_max_bytes,
            "traces_max_upload_bytes": self.traces_max_upload_bytes,
            "traces_max_line_bytes": self.traces_max_line_bytes,
            "traces_max_lines": self.traces_max_lines,
            "traces_max_per_episode": self.traces_max_per_episode,
            "traces_max_id_length": self.traces_max_id_length,
        }


class SettingsPatch(BaseModel):
    """Body of ``POST /_local/settings``: any subset of the public settings."""

    model_config = ConfigDict(extra="forbid")

    traces: Literal["enabled", "disabled"] | None = None
    teams: list[str] | None = Field(default=None, description="an explicit null allows every team")
    status_endpoint: Literal["present", "absent"] | None = None
    object_mode: ObjectMode | None = None
    samples_rate_limit: int | None = Field(default=None, ge=0)
    metrics_rate_limit: int | None = Field(default=None, ge=0)
    presign_ttl: int | None = Field(default=None, ge=0)
    processing_delay: float | None = Field(default=None, ge=0, le=3600)
    samples_max_bytes: int | None = Field(default=None, ge=0)
    traces_max_upload_bytes: int | None = Field(default=None, ge=0)
    traces_max_line_bytes: int | None = Field(default=None, ge=0)
    traces_max_lines: int | None = Field(default=None, ge=0)
    traces_max_per_episode: int | None = Field(default=None, ge=0)
    traces_max_id_length: int | None = Field(default=None, ge=0)

    def changes(self) -> dict[str, Any]:
        changes: dict[str, Any] = {}
        for key in self.model_fields_set:
            value = getattr(self, key)
            if key == "teams":
                changes["teams"] = None if value is None else frozenset(value)
            elif value is None:
                continue
            elif key == "traces":
                changes["traces_enabled"] = value == "enabled"
            elif key == "status_endpoint":
                changes["status_endpoint"] = value == "present"
            else:
                changes[key] = value
        return changes


class SettingsHolder:
    def __init__(self, initial: Settings) -> None:
        self._current = initial
        self._lock = threading.Lock()

    @property
    def current(self) -> Settings:
        return self._current

    def update(self, changes: Mapping[str, Any]) -> Settings:
        with self._lock:
            self._current = dataclasses.replace(self._current, **changes)
            return self._current


def parse_teams(value: str | None) -> frozenset[str] | None:
    """``--teams a,b``: None (option absent) allows every team."""
    if value is None:
        return None
    return frozenset(team.strip() for team in value.split(",") if team.strip())
