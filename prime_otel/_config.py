"""Settings resolution: argument → environment → ``~/.prime/config.json`` → default; the first hit wins.

The file is read once per resolution; a missing, unreadable, invalid or non-object file counts as ``{}``
(anything but a regular file too, with a warning: it is never opened in a way that could block).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._types import NotARegularFileError, RunMode, read_regular_file
from .client._urls import normalize_traces_url, strip_config_url
from .errors import ConfigurationError

logger = logging.getLogger(__name__)

MODE_ENV = "PRIME_RUNS_MODE"
TRACES_OPT_OUT_ENV = "PRIME_TRACES_OPT_OUT"
RUNS_DIR_ENV = "PRIME_RUNS_DIR"
DEFAULT_BASE_URL = "https://api.primeintellect.ai"
DEFAULT_FRONTEND_URL = "https://app.primeintellect.ai"
DEFAULT_TRACES_URL = "https://api.primeintellect.ai"
DEFAULT_RUNS_DIR = "prime-runs"
MAX_CONFIG_FILE_BYTES = 1024 * 1024

_MODES: tuple[RunMode, ...] = ("online", "offline", "disabled")
_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off"})


@dataclass(frozen=True)
class Settings:
    """Resolved connection settings; ``file_values`` is the config file as read, for later lookups."""

    api_key: str = field(repr=False)
    team_id: str | None
    base_url: str
    frontend_url: str
    traces_url: str
    runs_dir: Path
    file_values: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


def default_config_file() -> Path:
    return Path.home() / ".prime" / "config.json"


def read_config_file(path: Path | None = None) -> dict[str, Any]:
    """The config file's object, or ``{}`` when it is missing, unreadable, invalid JSON or not an object.
    Only a regular file is read (a FIFO would block ``init()`` forever); anything else is skipped with a warning."""
    try:
        data = json.loads(read_regular_file(path or default_config_file(), MAX_CONFIG_FILE_BYTES, "the settings file"))
    except NotARegularFileError as exc:
        logger.warning("%s; its settings are not used", exc)
        return {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def resolve_settings(
    *,
    api_key: str | None = None,
    team_id: str | None = None,
    base_url: str | None = None,
    environ: Mapping[str, str] = os.environ,
    config_file: Path | None = None,
) -> Settings:
    file_values = read_config_file(config_file)

    def file_str(key: str) -> str | None:
        value = file_values.get(key)
        return value if isinstance(value, str) and value else None

    def env(name: str) -> str | None:
        return environ.get(name) or None

    if api_key is None:
        api_key = env("PRIME_API_KEY") or file_str("api_key") or ""
    if team_id is None:
        # An empty PRIME_TEAM_ID counts as unset: sending `"team_id": ""` is a 0.1.4 defect.
        team_id = env("PRIME_TEAM_ID") or file_str("team_id")
    base = base_url or env("PRIME_API_BASE_URL") or env("PRIME_BASE_URL") or file_str("base_url") or DEFAULT_BASE_URL
    frontend = env("PRIME_FRONTEND_URL") or file_str("frontend_url") or DEFAULT_FRONTEND_URL
    traces = env("PRIME_TRACES_URL") or file_str("traces_url") or DEFAULT_TRACES_URL
    runs_dir = Path(env(RUNS_DIR_ENV) or DEFAULT_RUNS_DIR)
    return Settings(
        api_key=api_key,
        team_id=team_id,
        base_url=strip_config_url(base),
        frontend_url=frontend.strip().rstrip("/"),
        traces_url=normalize_traces_url(traces),
        runs_dir=runs_dir.absolute(),
        file_values=file_values,
    )


def resolve_mode(arg: str | None, settings: Settings, environ: Mapping[str, str] = os.environ) -> RunMode:
    """Argument → ``PRIME_RUNS_MODE`` → online with an API key, else disabled with a warning.

    An unknown mode, or online without an API key, raises ``ConfigurationError``.
    """
    raw = arg if arg is not None else (environ.get(MODE_ENV) or "").strip() or None
    if raw is None:
        if settings.api_key:
            return "online"
        logger.warning("no API key found (set PRIME_API_KEY or run `prime login`); this run will not be tracked")
        return "disabled"
    mode = next((candidate for candidate in _MODES if isinstance(raw, str) and candidate == raw.strip().lower()), None)
    if mode is None:
        # 0.1.4's wording, with the mode it did not have.
        raise ConfigurationError(f"mode={raw!r} is not one of 'online', 'offline' or 'disabled'")
    if mode == "online" and not settings.api_key:
        raise ConfigurationError(
            'mode="online" needs an API key: set PRIME_API_KEY, run `prime login`, '
            'or use mode="offline" or mode="disabled"'
        )
    return mode


def resolve_traces_opt_out(
    arg: bool | None, environ: Mapping[str, str] = os.environ, file: Mapping[str, Any] | None = None
) -> bool:
    """Argument → ``PRIME_TRACES_OPT_OUT`` (yes/no words, else ``ConfigurationError``) → file → False."""
    if arg is not None:
        return bool(arg)
    value = (environ.get(TRACES_OPT_OUT_ENV) or "").strip().lower()
    if value:
        if value in _TRUE_WORDS:
            return True
        if value in _FALSE_WORDS:
            return False
        raise ConfigurationError(
            f"{TRACES_OPT_OUT_ENV}={environ[TRACES_OPT_OUT_ENV]!r} is not one of "
            f"{', '.join(sorted(_TRUE_WORDS))} or {', '.join(sorted(_FALSE_WORDS))}"
        )
    file_value = (file or {}).get("traces_opt_out", False)
    if isinstance(file_value, str):
        return file_value.strip().lower() in _TRUE_WORDS
    return bool(file_value)


SINKS_ENV = "PRIME_OTEL_SINKS"
SAMPLES_STEP_INTERVAL_ENV = "PRIME_OTEL_SAMPLES_STEP_INTERVAL"
SPOOL_MAX_BYTES_ENV = "PRIME_OTEL_SPOOL_MAX_BYTES"
FINISH_TIMEOUT_ENV = "PRIME_OTEL_FINISH_TIMEOUT"
STATUS_LINE_ENV = "PRIME_OTEL_STATUS_LINE"


def _from_environment(name: str, environ: Mapping[str, str]) -> str | None:
    value = environ.get(name, "").strip()
    return value or None


def resolve_choice(
    arg: str | None, env_name: str, choices: tuple[str, ...], default: str, environ: Mapping[str, str] = os.environ
) -> str:
    """Argument → ``env_name`` (one of ``choices``, any case, else ``ConfigurationError`` naming the variable) →
    ``default``. The argument is returned as given: its caller checks it."""
    if arg is not None:
        return arg
    raw = _from_environment(env_name, environ)
    if raw is None:
        return default
    if raw.lower() not in choices:
        raise ConfigurationError(f"{env_name}={raw!r} is not one of {', '.join(choices)}")
    return raw.lower()


def resolve_number(
    arg: float | None, env_name: str, default: float | None, environ: Mapping[str, str] = os.environ
) -> float | None:
    """Argument → ``env_name`` (a number, else ``ConfigurationError`` naming the variable) → ``default``."""
    if arg is not None:
        return arg
    raw = _from_environment(env_name, environ)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigurationError(f"{env_name}={raw!r} is not a number") from None


def resolve_count(arg: int | None, env_name: str, default: int, environ: Mapping[str, str] = os.environ) -> int:
    """Argument → ``env_name`` (a whole number, else ``ConfigurationError`` naming the variable) → ``default``."""
    if arg is not None:
        return arg
    raw = _from_environment(env_name, environ)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"{env_name}={raw!r} is not a whole number") from None


def resolve_flag(arg: bool | None, env_name: str, default: bool, environ: Mapping[str, str] = os.environ) -> bool:
    """Argument → ``env_name`` (yes/no words, else ``ConfigurationError`` naming the variable) → ``default``."""
    if arg is not None:
        return bool(arg)
    raw = _from_environment(env_name, environ)
    if raw is None:
        return default
    if raw.lower() in _TRUE_WORDS:
        return True
    if raw.lower() in _FALSE_WORDS:
        return False
    raise ConfigurationError(f"{env_name}={raw!r} is not one of {', '.join(sorted(_TRUE_WORDS | _FALSE_WORDS))}")
