"""The opt-in ``prime_runs`` import shim: once installed, prime-runs imports resolve to prime-otel's own modules
(one copy each); without it, the installed prime-runs is untouched. Each case runs in a fresh interpreter."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from prime_otel.testing import LocalPlatform

INSTRUMENT = Path(sys.executable).with_name("opentelemetry-instrument")
CHECKOUT = Path(__file__).resolve().parents[2]


def run_python(code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> dict[str, Any]:
    """Runs ``code`` in a fresh interpreter; its last stdout line is JSON."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env={**os.environ, "PYTHONPATH": str(CHECKOUT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def test_with_the_shim_prime_runs_and_its_submodules_are_prime_otels_modules_not_a_second_copy() -> None:
    seen = run_python(
        """
        import json, sys
        import prime_otel.compat
        prime_otel.compat.install()
        import prime_runs as pr
        from prime_runs.projection import build_samples
        import prime_runs.exceptions, prime_runs.models, prime_runs.metrics, prime_runs.run
        import prime_otel, prime_otel.projection
        loaded = sorted(name for name, module in sys.modules.items()
                        if "site-packages/prime_runs" in (getattr(module, "__file__", None) or ""))
        print(json.dumps({
            "same_package": pr is prime_otel,
            "same_function": build_samples is prime_otel.projection.build_samples,
            "same_run_class": pr.Run is prime_otel.Run and pr.run.Run is prime_otel.Run,
            "same_errors": pr.exceptions.ConfigurationError is prime_otel.ConfigurationError,
            "status": pr.models.RunStatus.FAILED.value,
            "spec_kept": prime_otel.projection.__spec__.name,
            "real_prime_runs_modules": loaded,
        }))
        """
    )
    assert seen == {
        "same_package": True,
        "same_function": True,
        "same_run_class": True,
        "same_errors": True,
        "status": "failed",
        "spec_kept": "prime_otel.projection",
        "real_prime_runs_modules": [],
    }


def test_a_prime_runs_internal_module_is_refused_with_a_message_naming_what_is_provided() -> None:
    seen = run_python(
        """
        import json
        import prime_otel.compat
        prime_otel.compat.install()
        try:
            import prime_runs.sinks.traces
        except ModuleNotFoundError as exc:
            print(json.dumps({"name": exc.name, "message": str(exc)}))
        """
    )
    assert seen["name"] == "prime_runs.sinks"
    assert "prime_runs.projection" in seen["message"]
    assert "docs/differences-from-prime-runs.md" in seen["message"]


def test_without_the_shim_the_installed_prime_runs_is_imported_even_after_prime_otel() -> None:
    seen = run_python(
        """
        import json
        import prime_otel, prime_otel.compat
        import prime_runs
        print(json.dumps({"file": prime_runs.__file__, "version": prime_runs.__version__,
                          "installed": prime_otel.compat.installed()}))
        """
    )
    assert seen["file"].endswith("site-packages/prime_runs/__init__.py")
    assert seen["version"] == "0.1.4"
    assert seen["installed"] is False


def test_installing_after_the_real_prime_runs_was_imported_is_refused_and_uninstall_restores_it() -> None:
    seen = run_python(
        """
        import json
        import prime_runs
        import prime_otel.compat as compat
        try:
            compat.install()
            refused = None
        except compat.PrimeRunsAlreadyImportedError as exc:
            refused = str(exc)
        import sys
        del sys.modules["prime_runs"]
        compat.install()
        import prime_runs as aliased
        compat.uninstall()
        for name in [n for n in sys.modules if n == "prime_runs" or n.startswith("prime_runs.")]:
            del sys.modules[name]
        import prime_runs as real_again
        print(json.dumps({"refused": refused, "aliased": aliased.__name__, "again": real_again.__version__}))
        """
    )
    assert "install prime_otel.compat before anything imports prime_runs" in seen["refused"]
    assert seen["aliased"] == "prime_otel"
    assert seen["again"] == "0.1.4"


def test_python_dash_m_prime_otel_compat_runs_a_script_and_a_module_with_their_arguments(tmp_path: Path) -> None:
    script = tmp_path / "producer.py"
    script.write_text(
        "import json, sys\nimport prime_runs\nprint(json.dumps({'sdk': prime_runs.__name__, 'argv': sys.argv}))\n"
    )
    as_script = subprocess.run(
        [sys.executable, "-m", "prime_otel.compat", str(script), "--flag", "x"],
        env={**os.environ, "PYTHONPATH": str(CHECKOUT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert as_script.returncode == 0, as_script.stderr
    assert json.loads(as_script.stdout) == {"sdk": "prime_otel", "argv": [str(script), "--flag", "x"]}
    as_module = subprocess.run(
        [sys.executable, "-m", "prime_otel.compat", "-m", "producer", "y"],
        env={**os.environ, "PYTHONPATH": f"{CHECKOUT}{os.pathsep}{tmp_path}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert as_module.returncode == 0, as_module.stderr
    seen = json.loads(as_module.stdout)
    assert seen["sdk"] == "prime_otel" and seen["argv"][1:] == ["y"]


def test_under_opentelemetry_instrument_the_variable_runs_an_unmodified_producer_on_one_prime_otel_run(
    local_platform_session: LocalPlatform, tmp_path: Path
) -> None:
    """The producer's own prime_runs.init() opens the run; no zero-code run is opened beside it, even with
    PRIME_RUN_* variables set."""
    script = tmp_path / "producer.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, sys
            import prime_runs as pr
            from tests._fixtures import load_episodes
            run = pr.init(name="shim-under-instrument", environments=["gsm8k"], model="m", framework="verifiers")
            run.log_episodes(load_episodes("eval"))
            run.finish(summary=pr.metrics.from_episodes(load_episodes("eval")))
            print(json.dumps({"sdk": pr.__name__, "id": run.id}))
            """
        )
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(CHECKOUT),
        "HOME": str(tmp_path),
        "PRIME_RUNS_DIR": str(tmp_path / "runs"),
        **local_platform_session.env,
        "OTEL_PYTHON_DISTRO": "prime",
        "PRIME_OTEL_AS_PRIME_RUNS": "1",
        "PRIME_RUN_NAME": "shim-zero-code-must-not-open",
        "PRIME_RUN_ENVIRONMENTS": "gsm8k",
    }
    env.pop("OTEL_PYTHON_CONFIGURATOR", None)
    result = subprocess.run(
        [str(INSTRUMENT), sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["sdk"] == "prime_otel"
    names = [run["name"] for run in local_platform_session.inspect.runs()]
    assert names.count("shim-under-instrument") == 1
    assert "shim-zero-code-must-not-open" not in names
    snapshot = local_platform_session.inspect.run(seen["id"])
    assert snapshot["num_episodes"] == 3
    assert snapshot["summary"]["prime_runs"]["traces_episodes_written"] == 3


def test_a_level_and_handler_set_on_the_prime_runs_logger_apply_to_prime_otels_records() -> None:
    configured = logging.getLogger("prime_runs")
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    configured.addHandler(handler)
    previous = configured.level
    try:
        configured.setLevel(logging.ERROR)
        logging.getLogger("prime_otel.exporters.traces").warning("below the prime_runs level")
        configured.setLevel(logging.INFO)
        logging.getLogger("prime_otel").info("at the prime_runs level")
    finally:
        configured.removeHandler(handler)
        configured.setLevel(previous)
    assert [record.getMessage() for record in seen] == ["at the prime_runs level"]
