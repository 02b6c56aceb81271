"""The package keeps the layer picture of ARCHITECTURE.md: every import points down or sideways to a room it
may use, and no two rooms import each other (directly or around a loop).

Each module under ``prime_otel/`` is parsed (not imported) and every ``import``/``from ... import`` in it
counts, including those under ``if TYPE_CHECKING:`` and inside functions.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "prime_otel"

#: Root modules that import nothing above them: what a record, an error, a run's vocabulary, a sink is; whole files.
GROUND_FLOOR_MODULES = frozenset(
    {"errors", "_conventions", "_version", "_attempts", "_types", "_fork", "_sink", "_files", "_throttle", "_processes"}
)
#: Root modules that belong to a room other than the facade.
ROOM_OF_ROOT_MODULE = {
    "projection": "exporters",  # the public projection module sits beside the exporters
    "_assembly": "assembly",  # one sink assembly: which sinks and slots a run writes through
    "_backends": "assembly",  # registering, attaching and closing a run on the platform
    "_config": "assembly",  # configuration: argument, environment, ~/.prime/config.json
    "cli": "entry",  # the ``prime-otel`` command: dispatches to sync, the gateway and the local platform
}
ROOM_PACKAGES = frozenset(
    {"records", "client", "resources", "exporters", "processors", "gateway", "local", "run", "offline"}
)

GROUND = "ground"
FACADE = "facade"

_SDK = frozenset({GROUND, "client", "resources", "exporters", "processors"})

#: What each room may import besides itself. The run handle, offline runs and sync, and the gateway stand on the
#: shared assembly; the public facade at the root stands on the run room; the command line sits above them all.
MAY_IMPORT: dict[str, frozenset[str]] = {
    GROUND: frozenset(),
    "client": frozenset({GROUND}),
    "resources": frozenset({GROUND}),
    "exporters": frozenset({GROUND, "client", "resources"}),
    "processors": frozenset({GROUND, "client", "resources"}),
    "assembly": _SDK,
    "gateway": frozenset({*_SDK, "assembly"}),
    "offline": frozenset({*_SDK, "assembly"}),
    "run": frozenset({*_SDK, "assembly", "offline"}),
    FACADE: frozenset({*_SDK, "assembly", "run", "offline"}),
    "entry": frozenset({*_SDK, "assembly", "gateway", "run", "offline", FACADE, "local"}),
    # The local platform only speaks HTTP: it shares no code with the SDK.
    "local": frozenset(),
}

#: Imports that break the picture today, each with the reason it is not fixed yet. A new one fails the test.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The prime_otel modules ``name`` imports; ``from pkg import sub`` names the submodule when it is one."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.split(".")[0] == "prime_otel")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "prime_otel":
                continue
            submodules = [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in known]
            if submodules:
                yield from submodules
            if len(submodules) < len(node.names):
                yield target


def _room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return FACADE
    head = parts[1]
    if head in ROOM_PACKAGES:
        return GROUND if head == "records" else head
    if head in GROUND_FLOOR_MODULES:
        return GROUND
    return ROOM_OF_ROOT_MODULE.get(head, FACADE)


def _edges() -> list[tuple[str, str]]:
    modules = _modules()
    known = set(modules)
    return [(name, target) for name, path in modules.items() for target in _imports(name, path, known)]


def test_every_import_points_at_a_room_the_importer_may_use() -> None:
    violations = []
    for importer, target in _edges():
        source_room, target_room = _room(importer), _room(target)
        if source_room == target_room or target_room in MAY_IMPORT[source_room]:
            continue
        if (importer, target) not in KNOWN_EXCEPTIONS:
            violations.append(f"{importer} ({source_room}) imports {target} ({target_room})")
    assert violations == []


def test_known_exceptions_are_still_needed() -> None:
    """An exception that no longer occurs is removed from the list, so it cannot hide a new import."""
    edges = set(_edges())
    assert [pair for pair in KNOWN_EXCEPTIONS if pair not in edges] == []


def test_no_two_rooms_import_each_other() -> None:
    graph: dict[str, set[str]] = {}
    for importer, target in _edges():
        if (importer, target) in KNOWN_EXCEPTIONS:
            continue
        source_room, target_room = _room(importer), _room(target)
        if source_room != target_room:
            graph.setdefault(source_room, set()).add(target_room)
    cycles = []
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            room, path = stack.pop()
            for following in graph.get(room, ()):
                if following == start:
                    cycles.append(" -> ".join([*path, start]))
                elif following not in seen:
                    seen.add(following)
                    stack.append((following, [*path, following]))
    assert cycles == []


def test_the_client_never_imports_the_package_root() -> None:
    assert [(a, b) for a, b in _edges() if _room(a) == "client" and b == "prime_otel"] == []


def test_the_room_map_sees_every_module() -> None:
    """The parser finds the rooms it checks (a wrong path would make every other test pass vacuously)."""
    rooms = {_room(name) for name in _modules()}
    assert rooms == set(MAY_IMPORT)
    assert any(_room(a) == "exporters" and _room(b) == GROUND for a, b in _edges())
