"""No test module or conftest imports a conftest or another test module: what tests share lives in an
underscore helper module (``tests/_fixtures.py``, ``tests/gateway/_gateway.py``, ...), so pytest's collection
never runs a test module twice or under two names, and a conftest's fixtures reach tests only through pytest."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _is_test_module(name: str) -> bool:
    leaf = name.rsplit(".", 1)[-1]
    return leaf == "conftest" or leaf.startswith("test_")


def _imported_modules(path: Path, source: str | None = None) -> Iterator[str]:
    """Every module ``path`` (or ``source`` as if it were at ``path``) imports, relative imports resolved."""
    package = list(path.relative_to(TESTS.parent).with_suffix("").parts[:-1])
    text = path.read_text(encoding="utf-8") if source is None else source
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)


def _importers() -> list[Path]:
    return sorted(path for path in TESTS.rglob("*.py") if path.name == "conftest.py" or path.name.startswith("test_"))


def test_no_test_module_or_conftest_imports_a_conftest_or_a_test_module() -> None:
    offending = [
        f"{path.relative_to(TESTS.parent)} imports {module}"
        for path in _importers()
        for module in _imported_modules(path)
        if module.split(".")[0] == "tests" and _is_test_module(module)
    ]
    assert offending == []


def test_the_check_sees_an_import_of_a_conftest() -> None:
    """The scan itself: a relative and an absolute import of a conftest or test module are both found."""
    module = TESTS / "gateway" / "test_example_for_the_scan.py"
    source = "from .conftest import TEAM\nfrom tests.gateway import test_ending\nimport tests.sdk.conftest\n"
    found = list(_imported_modules(module, source))
    assert [name for name in found if _is_test_module(name)] == [
        "tests.gateway.conftest",
        "tests.gateway.test_ending",
        "tests.sdk.conftest",
    ]
