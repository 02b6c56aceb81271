"""``run.json``: what a run folder says about its run. The producer writes it; ``prime-otel sync`` reads it,
checked field by field before anything is sent, so a damaged folder costs a clear error instead of a
traceback or a half-registered run.

The folder records where the run's data goes (``base_url``, ``traces_url``, ``frontend_url``), never the
API key, and which process produced it (``host``, ``pid``), so a sync can tell a producer that died from one
that is still running.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

from .._config import DEFAULT_BASE_URL, DEFAULT_FRONTEND_URL, DEFAULT_TRACES_URL, Settings
from .._processes import pid_alive, process_start
from .._types import RUN_KINDS, EnvironmentRef, RunKind, RunMode, RunStatus, SinkPolicy, TrainingSpec
from ..client._urls import normalize_traces_url, strip_config_url
from ..errors import ConfigurationError

URL_FIELDS = ("base_url", "traces_url", "frontend_url")
_DEFAULT_URLS = {
    "base_url": strip_config_url(DEFAULT_BASE_URL),
    "traces_url": normalize_traces_url(DEFAULT_TRACES_URL),
    "frontend_url": DEFAULT_FRONTEND_URL.rstrip("/"),
}
_MODES: tuple[RunMode, ...] = ("online", "offline")
_Choice = TypeVar("_Choice", bound=str)
_SINK_POLICIES: tuple[SinkPolicy, ...] = ("dual", "traces", "legacy")
_TRAINING_FIELDS = {spec.name for spec in fields(TrainingSpec)}
_ENVIRONMENT_FIELDS = {spec.name for spec in fields(EnvironmentRef)}


class RunDocumentError(ConfigurationError):
    """``run.json`` cannot be used as it is; the message names the file and the field."""


def recorded_urls(settings: Settings, *, registered: bool) -> dict[str, str]:
    """The URLs a later sync sends to. A registered (online) run records all of them: the run lives there. An
    offline run records only those chosen for it (argument, environment or config file), so a folder written
    with nothing chosen goes where its sync is pointed."""
    urls = {"base_url": settings.base_url, "traces_url": settings.traces_url, "frontend_url": settings.frontend_url}
    return {name: url for name, url in urls.items() if registered or url != _DEFAULT_URLS[name]}


def producer_process() -> dict[str, Any]:
    """Which process writes the run: a sync leaves the run alone while that process is alive."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "pid_started": process_start(pid)}


@dataclass(frozen=True)
class RunDocument:
    """A checked ``run.json``; :attr:`raw` is the document as read, for writing it back with changes."""

    path: Path
    raw: dict[str, Any]
    mode: RunMode
    id: str | None
    kind: RunKind
    status: RunStatus
    error: str | None
    name: str | None
    model: str | None
    framework: str | None
    description: str | None
    tags: list[str]
    environments: list[EnvironmentRef]
    config: dict[str, Any]
    summary: dict[str, Any]
    training: TrainingSpec | None
    team_id: str | None
    urls: dict[str, str]
    samples_step_interval: int | None
    sinks: SinkPolicy
    traces_opt_out: bool
    closed_on_platform: bool
    attached: bool
    url: str | None
    host: str | None
    pid: int | None
    pid_started: str | None

    @classmethod
    def read(cls, path: Path) -> RunDocument:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise RunDocumentError(f"{path} could not be read: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise RunDocumentError(f"{path} is not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise RunDocumentError(
                f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
            ) from None
        if not isinstance(raw, dict):
            raise RunDocumentError(f"{path} must hold a JSON object, not {type(raw).__name__}")
        return _Reader(path, raw).document()

    @property
    def finished(self) -> bool:
        return self.status is not RunStatus.RUNNING

    def producer_alive(self) -> bool:
        """Whether the process that wrote the run is still running (known on its own host only)."""
        if self.pid is None or self.host != socket.gethostname() or not pid_alive(self.pid):
            return False
        return self.pid_started is None or process_start(self.pid) in (None, self.pid_started)


class _Reader:
    def __init__(self, path: Path, raw: dict[str, Any]) -> None:
        self.path = path
        self.raw = raw

    def fail(self, name: str, problem: str) -> RunDocumentError:
        return RunDocumentError(f"{self.path}: field {name!r} {problem}")

    def present(self, name: str) -> Any:
        if self.raw.get(name) is None:
            raise self.fail(name, "is missing")
        return self.raw[name]

    def choice(self, name: str, allowed: tuple[_Choice, ...], default: _Choice | None = None) -> _Choice:
        value = self.raw.get(name, default) if default is not None else self.present(name)
        chosen = next((option for option in allowed if option == value), None)
        if chosen is None:
            raise self.fail(name, f"must be one of {', '.join(allowed)}, got {value!r}")
        return chosen

    def text(self, name: str, *, required: bool = False) -> str | None:
        value = self.present(name) if required else self.raw.get(name)
        if value is not None and not isinstance(value, str):
            raise self.fail(name, f"must be a string, got {type(value).__name__}")
        if required and not value:
            raise self.fail(name, "is empty")
        return value or None

    def mapping(self, name: str) -> dict[str, Any]:
        value = self.raw.get(name)
        if value is not None and not isinstance(value, Mapping):
            raise self.fail(name, f"must be an object, got {type(value).__name__}")
        return dict(value or {})

    def flag(self, name: str) -> bool:
        value = self.raw.get(name, False)
        if not isinstance(value, bool):
            raise self.fail(name, f"must be true or false, got {value!r}")
        return value

    def integer(self, name: str, minimum: int) -> int | None:
        value = self.raw.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
            raise self.fail(name, f"must be an integer of at least {minimum}, got {value!r}")
        return value

    def tags(self) -> list[str]:
        value = self.raw.get("tags")
        if value is not None and (not isinstance(value, list) or not all(isinstance(tag, str) for tag in value)):
            raise self.fail("tags", "must be a list of strings")
        return list(value or [])

    def environments(self) -> list[EnvironmentRef]:
        value = self.raw.get("environments")
        if value is not None and not isinstance(value, list):
            raise self.fail("environments", f"must be a list, got {type(value).__name__}")
        refs = []
        for number, entry in enumerate(value or [], start=1):
            if not isinstance(entry, Mapping) or not set(entry) <= _ENVIRONMENT_FIELDS:
                raise self.fail("environments", f"entry {number} must be an object of {sorted(_ENVIRONMENT_FIELDS)}")
            try:
                refs.append(EnvironmentRef(**entry))
            except (TypeError, ValueError) as exc:
                raise self.fail("environments", f"entry {number}: {exc}") from None
        return refs

    def training(self) -> TrainingSpec | None:
        value = self.mapping("training")
        if not value:
            return None
        unknown = sorted(set(value) - _TRAINING_FIELDS)
        if unknown:
            raise self.fail("training", f"has unknown keys {unknown}")
        try:
            return TrainingSpec(**value)
        except (TypeError, ValueError) as exc:
            raise self.fail("training", str(exc)) from None

    def urls(self) -> dict[str, str]:
        urls = {name: self.text(name) for name in URL_FIELDS}
        for name, url in urls.items():
            if url is not None and not url.startswith(("http://", "https://")):
                raise self.fail(name, f"must be an http(s) URL, got {url!r}")
        return {name: url for name, url in urls.items() if url is not None}

    def document(self) -> RunDocument:
        mode = self.choice("mode", _MODES, default="offline")  # folders written before the mode was recorded
        status = self.choice("status", tuple(status.value for status in RunStatus))
        pid = self.integer("pid", 1)
        return RunDocument(
            path=self.path,
            raw=self.raw,
            mode=mode,
            id=self.text("id", required=mode == "online"),
            kind=self.choice("kind", RUN_KINDS),
            status=RunStatus(status),
            error=self.text("error"),
            name=self.text("name"),
            model=self.text("model"),
            framework=self.text("framework"),
            description=self.text("description"),
            tags=self.tags(),
            environments=self.environments(),
            config=self.mapping("config"),
            summary=self.mapping("summary"),
            training=self.training(),
            team_id=self.text("team_id"),
            urls=self.urls(),
            samples_step_interval=self.integer("samples_step_interval", 1),
            sinks=self.choice("sinks", _SINK_POLICIES, default="dual"),
            traces_opt_out=self.flag("traces_opt_out"),
            closed_on_platform=self.flag("closed_on_platform"),
            attached=self.flag("attached"),
            url=self.text("url"),
            host=self.text("host"),
            pid=pid,
            pid_started=self.text("pid_started"),
        )
