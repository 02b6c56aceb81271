"""Configuration precedence: argument → environment → ~/.prime/config.json → default; a bad file counts as {}."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from prime_otel._config import resolve_mode, resolve_settings, resolve_traces_opt_out
from prime_otel.errors import ConfigurationError


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_config(home: Path, content: Any) -> None:
    (home / ".prime").mkdir(exist_ok=True)
    if isinstance(content, bytes):
        (home / ".prime" / "config.json").write_bytes(content)
    else:
        text = content if isinstance(content, str) else json.dumps(content)
        (home / ".prime" / "config.json").write_text(text)


FILE = {
    "api_key": "file_key",
    "team_id": "file_team",
    "base_url": "https://file.test/api/v1/",
    "frontend_url": "https://app.file.test/",
    "traces_url": "https://traces.file.test/api/v1",
}


def test_defaults_with_no_file_and_no_environment(home: Path) -> None:
    settings = resolve_settings(environ={})
    assert settings.api_key == ""
    assert settings.team_id is None
    assert settings.base_url == "https://api.primeintellect.ai"
    assert settings.frontend_url == "https://app.primeintellect.ai"
    assert settings.traces_url == "https://api.primeintellect.ai"
    assert settings.runs_dir == home / "prime-runs"


def test_file_values_apply_normalised(home: Path) -> None:
    write_config(home, FILE)
    settings = resolve_settings(environ={})
    assert (settings.api_key, settings.team_id) == ("file_key", "file_team")
    assert settings.base_url == "https://file.test"
    assert settings.frontend_url == "https://app.file.test"
    assert settings.traces_url == "https://traces.file.test"


def test_config_file_path_can_be_given(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere.json"
    path.write_text(json.dumps({"api_key": "from_path"}))
    assert resolve_settings(environ={}, config_file=path).api_key == "from_path"


@pytest.mark.parametrize(
    ("arg", "env", "expected"),
    [
        ("arg_key", "env_key", "arg_key"),
        ("", "env_key", ""),  # an explicit empty key wins
        (None, "env_key", "env_key"),
        (None, "", "file_key"),
    ],
)
def test_api_key_precedence(home: Path, arg: str | None, env: str, expected: str) -> None:
    """An explicit API key wins even when empty, then a non-empty PRIME_API_KEY, then the file."""
    write_config(home, FILE)
    assert resolve_settings(api_key=arg, environ={"PRIME_API_KEY": env}).api_key == expected


@pytest.mark.parametrize(
    ("arg", "environ", "file_team", "expected"),
    [
        ("arg_team", {"PRIME_TEAM_ID": "env_team"}, "file_team", "arg_team"),
        ("", {"PRIME_TEAM_ID": "env_team"}, "file_team", ""),  # an explicit empty team wins
        (None, {"PRIME_TEAM_ID": "env_team"}, "file_team", "env_team"),
        (None, {}, "file_team", "file_team"),
        (None, {"PRIME_TEAM_ID": ""}, "file_team", "file_team"),  # empty env counts as unset (0.1.4 sent "")
        (None, {}, "", None),
    ],
)
def test_team_precedence(
    home: Path, arg: str | None, environ: dict[str, str], file_team: str, expected: str | None
) -> None:
    """An explicit team wins even when empty, then a non-empty PRIME_TEAM_ID, then a non-empty file value."""
    write_config(home, {"team_id": file_team})
    assert resolve_settings(team_id=arg, environ=environ).team_id == expected


@pytest.mark.parametrize(
    ("arg", "environ", "expected"),
    [
        ("https://arg.test/api/v1/", {"PRIME_API_BASE_URL": "https://a.test"}, "https://arg.test"),
        ("", {"PRIME_API_BASE_URL": "https://a.test/api/v1"}, "https://a.test"),
        (None, {"PRIME_API_BASE_URL": "https://a.test/", "PRIME_BASE_URL": "https://b.test"}, "https://a.test"),
        (None, {"PRIME_API_BASE_URL": "", "PRIME_BASE_URL": "https://b.test/api/v1"}, "https://b.test"),
        (None, {}, "https://file.test"),
        ("https://x.test/api/internal/rft", {}, "https://x.test/api/internal/rft"),
    ],
)
def test_base_url_precedence_and_normalisation(
    home: Path, arg: str | None, environ: dict[str, str], expected: str
) -> None:
    """A truthy argument, then PRIME_API_BASE_URL, PRIME_BASE_URL, the file; each loses a trailing / and /api/v1."""
    write_config(home, FILE)
    assert resolve_settings(base_url=arg, environ=environ).base_url == expected


def test_frontend_url_precedence(home: Path) -> None:
    """The dashboard URL: a non-empty PRIME_FRONTEND_URL, then the file; a trailing / is stripped."""
    write_config(home, FILE)
    assert resolve_settings(environ={"PRIME_FRONTEND_URL": "https://env.app/"}).frontend_url == "https://env.app"
    assert resolve_settings(environ={"PRIME_FRONTEND_URL": ""}).frontend_url == "https://app.file.test"


def test_traces_url_never_falls_back_to_the_platform_base(home: Path) -> None:
    """The traces URL: PRIME_TRACES_URL, then the file, then the public default; never the platform base URL."""
    environ = {"PRIME_API_BASE_URL": "http://127.0.0.1:9999"}
    assert resolve_settings(environ=environ).traces_url == "https://api.primeintellect.ai"
    environ["PRIME_TRACES_URL"] = "http://localhost:8083/"
    assert resolve_settings(environ=environ).traces_url == "http://localhost:8083"
    write_config(home, {"traces_url": "https://t.file/api/v1/"})
    assert resolve_settings(environ={}).traces_url == "https://t.file"


def test_runs_dir_from_environment(home: Path) -> None:
    assert resolve_settings(environ={"PRIME_RUNS_DIR": str(home / "spool")}).runs_dir == home / "spool"


@pytest.mark.parametrize(
    "content", [None, "{not json", "[1, 2]", '"text"', "null", b"\xff\xfe{}"], ids=lambda c: repr(c)[:12]
)
def test_unusable_config_file_counts_as_empty(home: Path, content: str | bytes | None) -> None:
    """A missing, invalid, non-object or undecodable config file counts as empty."""
    if content is not None:
        write_config(home, content)
    settings = resolve_settings(environ={})
    assert settings.api_key == ""
    assert settings.base_url == "https://api.primeintellect.ai"


def test_unreadable_config_file_counts_as_empty(home: Path) -> None:
    (home / ".prime" / "config.json").mkdir(parents=True)
    assert resolve_settings(environ={}).api_key == ""


def test_settings_repr_hides_the_api_key(home: Path) -> None:
    settings = resolve_settings(api_key="pit_secret_value", environ={})
    assert "pit_secret_value" not in repr(settings)


# --- mode -------------------------------------------------------------------------------------


def test_mode_argument_wins(home: Path) -> None:
    settings = resolve_settings(api_key="k", environ={})
    assert resolve_mode("disabled", settings, {"PRIME_RUNS_MODE": "online"}) == "disabled"


@pytest.mark.parametrize(("value", "expected"), [(" OFFLINE ", "offline"), ("Online", "online"), ("", "online")])
def test_mode_from_environment_stripped_and_lowercased(home: Path, value: str, expected: str) -> None:
    """PRIME_RUNS_MODE is stripped and lowercased; an empty value means online when an API key exists."""
    settings = resolve_settings(api_key="k", environ={})
    assert resolve_mode(None, settings, {"PRIME_RUNS_MODE": value}) == expected


def test_no_key_means_disabled_with_a_warning(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    """With no API key and no mode the run is disabled with a warning: a missing key never writes elsewhere."""
    settings = resolve_settings(environ={})
    with caplog.at_level(logging.WARNING):
        assert resolve_mode(None, settings, {}) == "disabled"
    assert any("API key" in record.getMessage() for record in caplog.records)


def test_offline_needs_no_key(home: Path) -> None:
    assert resolve_mode("offline", resolve_settings(environ={}), {}) == "offline"


@pytest.mark.parametrize(("arg", "environ"), [("onlien", {}), (None, {"PRIME_RUNS_MODE": "sometimes"})])
def test_invalid_mode_is_a_configuration_error(home: Path, arg: str | None, environ: dict[str, str]) -> None:
    """An unknown mode, given as argument or in PRIME_RUNS_MODE, raises ConfigurationError."""
    with pytest.raises(ConfigurationError, match="mode"):
        resolve_mode(arg, resolve_settings(api_key="k", environ={}), environ)


@pytest.mark.parametrize(("arg", "environ"), [("online", {}), (None, {"PRIME_RUNS_MODE": "online"})])
def test_online_without_key_is_a_configuration_error(home: Path, arg: str | None, environ: dict[str, str]) -> None:
    """Online mode with no API key raises ConfigurationError."""
    with pytest.raises(ConfigurationError, match="API key"):
        resolve_mode(arg, resolve_settings(environ={}), environ)


# --- traces opt-out ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", True), (" TRUE ", True), ("yes", True), ("On", True), ("0", False), ("false", False), ("no", False)],
)
def test_opt_out_environment_words(value: str, expected: bool) -> None:
    """PRIME_TRACES_OPT_OUT takes 1/true/yes/on or 0/false/no/off in any case, and wins over the file."""
    assert resolve_traces_opt_out(None, {"PRIME_TRACES_OPT_OUT": value}, {"traces_opt_out": not expected}) is expected


def test_opt_out_invalid_environment_word_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="PRIME_TRACES_OPT_OUT"):
        resolve_traces_opt_out(None, {"PRIME_TRACES_OPT_OUT": "maybe"}, {})


def test_opt_out_argument_wins_over_a_bad_environment() -> None:
    assert resolve_traces_opt_out(False, {"PRIME_TRACES_OPT_OUT": "maybe"}, {"traces_opt_out": True}) is False


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        ({}, False),
        ({"traces_opt_out": True}, True),
        ({"traces_opt_out": "yes"}, True),
        ({"traces_opt_out": "y"}, False),
    ],
)
def test_opt_out_from_file_when_environment_blank(file: dict[str, Any], expected: bool) -> None:
    assert resolve_traces_opt_out(None, {"PRIME_TRACES_OPT_OUT": "  "}, file) is expected


def test_opt_out_reads_the_settings_file_values(home: Path) -> None:
    write_config(home, {"traces_opt_out": "on"})
    settings = resolve_settings(environ={})
    assert resolve_traces_opt_out(None, {}, settings.file_values) is True
