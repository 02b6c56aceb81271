"""Run an unmodified prime-runs producer on prime-otel: ``import prime_runs`` resolves to prime-otel.

Opt-in, by one of:

- ``prime_otel.compat.install()`` before anything imports ``prime_runs``;
- ``python -m prime_otel.compat -m <module> [args]`` (or ``... <script.py> [args]``), which installs the shim
  and runs the program as ``python -m <module>`` / ``python <script.py>`` would;
- ``PRIME_OTEL_AS_PRIME_RUNS=1`` under ``opentelemetry-instrument`` with ``OTEL_PYTHON_DISTRO=prime``.

Once installed, ``prime_runs`` *is* the ``prime_otel`` module and each provided submodule is the prime-otel
module of the same name (:data:`MODULES`): one copy of every module, so ``prime_runs.Run is prime_otel.Run``.
prime-runs 0.1.4's internals (its sinks, backends, worker and HTTP client) are not provided: importing one raises
``ModuleNotFoundError`` saying so. Nothing changes until the shim is installed, so an installed prime-runs (the
one verifiers depends on) keeps working in every other process. Differences from 0.1.4 are listed in
``docs/differences-from-prime-runs.md``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import runpy
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType

AS_PRIME_RUNS_ENV = "PRIME_OTEL_AS_PRIME_RUNS"
PRIME_RUNS = "prime_runs"

#: Each prime-runs 0.1.4 module the shim provides, and the prime-otel module it resolves to (same last name, so
#: the import system's ``setattr(parent, name, module)`` only ever sets what is already there).
MODULES: dict[str, str] = {
    "prime_runs": "prime_otel",
    "prime_runs.exceptions": "prime_otel.exceptions",
    "prime_runs.metrics": "prime_otel.metrics",
    "prime_runs.models": "prime_otel.models",
    "prime_runs.projection": "prime_otel.projection",
    "prime_runs.run": "prime_otel.run",
}

_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_logger = logging.getLogger("prime_otel")


class PrimeRunsAlreadyImportedError(RuntimeError):
    """The real prime-runs was imported before the shim was installed: two SDKs would be live in one process."""


class _AliasLoader(importlib.abc.Loader):
    """Loads nothing of its own: executing the placeholder module puts the prime-otel module in its place in
    ``sys.modules``, which is what the import statement then returns."""

    def __init__(self, target: str) -> None:
        self._target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        sys.modules[module.__name__] = importlib.import_module(self._target)


class PrimeRunsFinder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path`` while installed: answers every ``prime_runs`` import before the real package's
    finder can."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != PRIME_RUNS and not fullname.startswith(PRIME_RUNS + "."):
            return None
        module = MODULES.get(fullname)
        if module is None:
            raise ModuleNotFoundError(
                f"{fullname} is part of prime-runs 0.1.4's internals, which prime-otel does not provide under "
                f"prime_otel.compat (it provides {', '.join(sorted(MODULES))}); see "
                "docs/differences-from-prime-runs.md",
                name=fullname,
            )
        return importlib.util.spec_from_loader(fullname, _AliasLoader(module), is_package=fullname == PRIME_RUNS)


_finder = PrimeRunsFinder()


def installed() -> bool:
    return _finder in sys.meta_path


def install() -> None:
    """From now on ``import prime_runs`` (and its provided submodules) gives prime-otel. Idempotent.

    Raises :class:`PrimeRunsAlreadyImportedError` when the real prime-runs is already imported: install the shim
    first thing, before the producer's imports."""
    if installed():
        return
    loaded = sys.modules.get(PRIME_RUNS)
    if loaded is not None and getattr(loaded, "__name__", None) != "prime_otel":
        raise PrimeRunsAlreadyImportedError(
            f"the real prime-runs is already imported (from {getattr(loaded, '__file__', '?')}); install "
            "prime_otel.compat before anything imports prime_runs"
        )
    sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    """Stop answering ``prime_runs`` imports and forget the aliases made so far (objects already imported through
    them stay prime-otel's)."""
    while _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
    for name in [name for name in sys.modules if name in MODULES]:
        if getattr(sys.modules[name], "__name__", "").startswith("prime_otel"):
            del sys.modules[name]


def requested(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get(AS_PRIME_RUNS_ENV, "").strip().lower() in _TRUE_WORDS


def install_if_requested() -> bool:
    """``PRIME_OTEL_AS_PRIME_RUNS=1``: install, or warn (never raise) when the real prime-runs came first."""
    if not requested():
        return False
    try:
        install()
    except PrimeRunsAlreadyImportedError as exc:
        _logger.warning("%s=1 is ignored: %s", AS_PRIME_RUNS_ENV, exc)
        return False
    return True


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m prime_otel.compat -m module [args]`` or ``python -m prime_otel.compat script.py [args]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help") or (args[0] == "-m" and len(args) < 2):
        raise SystemExit("usage: python -m prime_otel.compat (-m module | script.py) [args...]")
    install()
    if args[0] == "-m":
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    # The module run as __main__ is a second copy of this file: use the importable one, whose finder install()
    # and installed() share.
    from prime_otel.compat import main as _main

    _main()
