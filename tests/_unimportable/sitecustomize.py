"""Put this folder on PYTHONPATH with PRIME_OTEL_TEST_UNIMPORTABLE=mod1,mod2: those modules (and their submodules)
then fail to import as if their distribution were not installed, so a test sees what a user without an extra sees."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType

_BLOCKED = tuple(name for name in os.environ.get("PRIME_OTEL_TEST_UNIMPORTABLE", "").split(",") if name)


class _NotInstalled(MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if any(fullname == name or fullname.startswith(name + ".") for name in _BLOCKED):
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


if _BLOCKED:
    sys.meta_path.insert(0, _NotInstalled())
