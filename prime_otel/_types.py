"""Value types of the public API: statuses, training spec, environment refs, config sources."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from .errors import ConfigurationError

RunKind = Literal["eval", "train"]
RunMode = Literal["online", "offline", "disabled"]
SinkPolicy = Literal["dual", "traces", "legacy"]

CONFIG_SOURCE_KEY = "config_source"
MAX_CONFIG_SOURCE_BYTES = 262_144
_CONFIG_FORMATS = {".toml": "toml", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}
_READ_CHUNK = 65536
_FILE_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotARegularFileError(ConfigurationError):
    """A settings or config path names something other than a regular file (reading it could block forever)."""


def read_regular_file(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """Up to ``limit`` bytes of a regular file. It is opened without blocking and checked before any read,
    so a FIFO (which would wait for a writer forever) or a device gives ``NotARegularFileError`` at once."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _FILE_KINDS if test(mode)), "something else")
            raise NotARegularFileError(f"{what} {os.fspath(path)!r} is {kind}, not a regular file")
        chunks: list[bytes] = []
        left = limit
        while left > 0:
            chunk = os.read(descriptor, min(_READ_CHUNK, left))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(descriptor)


class RunStatus(str, Enum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CRASHED = "crashed"

    def __str__(self) -> str:
        return self.value


def crashed_message(error: str | None) -> str:
    """The error message a run closed as crashed carries: ``crashed``, or ``crashed: <why>``."""
    return f"crashed: {error}" if error else "crashed"


@dataclass(frozen=True)
class TrainingSpec:
    """Display fields of a training run, sent when the external run is registered."""

    max_steps: int = 0
    batch_size: int | None = None
    rollouts_per_example: int | None = None
    seq_len: int | None = None
    wandb_project: str | None = None
    wandb_entity: str | None = None
    wandb_run_name: str | None = None

    def __post_init__(self) -> None:
        if self.max_steps < 0:
            raise ValueError(f"max_steps must be >= 0 (0 means unknown), got {self.max_steps}")


@dataclass(frozen=True)
class EnvironmentRef:
    """An environment of the hub, given by name, ``owner/name`` slug or id (optionally pinned to a version)."""

    name: str | None = None
    id: str | None = None
    version_id: str | None = None
    slug: str | None = None

    def __post_init__(self) -> None:
        if not (self.name or self.slug or self.id):
            raise ValueError("an environment needs a name, a slug or an id")
        if self.slug is not None:
            owner, _, rest = self.slug.partition("/")
            if not owner or not rest:
                raise ValueError(f"environment slug must look like 'owner/name', got {self.slug!r}")

    @classmethod
    def coerce(cls, value: EnvironmentRef | str | Mapping[str, Any]) -> EnvironmentRef:
        if isinstance(value, EnvironmentRef):
            return value
        if isinstance(value, str):
            return cls(slug=value) if "/" in value else cls(name=value)
        if isinstance(value, Mapping):
            return cls(
                name=value.get("name"), slug=value.get("slug"), id=value.get("id"), version_id=value.get("version_id")
            )
        raise TypeError(f"an environment must be a str, a mapping or an EnvironmentRef, got {type(value).__name__}")

    @property
    def display_name(self) -> str | None:
        """The environment's name: its own, or the name part of its slug."""
        if self.name:
            return self.name
        if self.slug:
            return self.slug.split("/", 1)[1]
        return None


@dataclass(frozen=True)
class ConfigSource:
    """The launched configuration file, stored byte for byte and shown verbatim in the Config tab."""

    text: str
    format: str = "toml"
    filename: str | None = None

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ConfigSource:
        try:
            raw = read_regular_file(path, MAX_CONFIG_SOURCE_BYTES + 1, "config file")
        except FileNotFoundError:
            raise ConfigurationError(
                f"config file {os.fspath(path)!r} does not exist; pass the path of the file the run was launched "
                "with, or ConfigSource(text=...) for inline text"
            ) from None
        except OSError as exc:
            raise ConfigurationError(f"config file {os.fspath(path)!r} could not be read: {exc}") from exc
        if len(raw) > MAX_CONFIG_SOURCE_BYTES:
            raise ConfigurationError(
                f"config file {os.fspath(path)!r} is larger than {MAX_CONFIG_SOURCE_BYTES} bytes; "
                "pass a mapping of the values that matter instead"
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigurationError(f"config file {os.fspath(path)!r} is not UTF-8: {exc}") from exc
        suffix = os.path.splitext(os.fspath(path))[1].lower()
        return cls(text=text, format=_CONFIG_FORMATS.get(suffix, "text"), filename=os.path.basename(os.fspath(path)))

    @classmethod
    def from_mapping(cls, value: Mapping[str, Any]) -> ConfigSource | None:
        """Rebuilt from its ``to_dict()`` form; None when ``value`` is not one."""
        text = value.get("text")
        if not isinstance(text, str):
            return None
        filename = value.get("filename")
        return cls(text=text, format=str(value.get("format") or "toml"), filename=str(filename) if filename else None)

    @classmethod
    def coerce(cls, value: ConfigSource | str | os.PathLike[str] | None) -> ConfigSource | None:
        """What ``init(config=)`` makes of a config source: a ``str`` or path-like is a *path* (never inline
        text), read by :meth:`from_file`; a ``ConfigSource`` or None is returned as it is."""
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, (str, os.PathLike)):
            return cls.from_file(value)
        raise TypeError(f"a config source must be a path or a ConfigSource, got {type(value).__name__}")

    def to_dict(self) -> dict[str, str]:
        out = {"format": self.format, "text": self.text}
        if self.filename:
            out["filename"] = self.filename
        return out
