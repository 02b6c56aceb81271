"""The public surface of the installed prime-runs 0.1.4 against prime-otel's, as a list of differences.

A module's public names are its ``__all__``, else the names its own source defines at top level (imports
excluded) without a leading underscore. Each prime-runs module is compared with the prime-otel module the
compatibility shim resolves it to (``prime_otel.compat.MODULES``); a prime-runs module the shim does not provide
is one difference (its submodules are not visited). For every name: presence; for an object both sides share,
nothing more; for a function or class, its call signature (parameter positions, keyword names, which are
required, simple defaults); for a class, its public members (on a disabled ``Run`` instance for ``Run``; a
method must stay a method, a value a value), whether it is a frozen dataclass, an enum's members with their
``str()``, a ``TypedDict``'s keys; for a ``Literal`` alias, its values (more is compatible); for a constant, its value.

Run ``python -m tests.compat._surface`` to print the differences.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import inspect
import logging
import pkgutil
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from prime_otel.compat import MODULES

_SIMPLE = (str, int, float, bool, type(None), tuple, frozenset)
_EMPTY = inspect.Parameter.empty
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
#: Dunder members a caller relies on.
_PROTOCOL_MEMBERS = ("__enter__", "__exit__")


@dataclass(frozen=True)
class Difference:
    name: str
    kind: str
    detail: str


def released_modules() -> list[str]:
    """Every public module of the installed prime-runs (no leading underscore in any part)."""
    package = importlib.import_module("prime_runs")
    names = ["prime_runs"]
    for info in pkgutil.walk_packages(package.__path__, "prime_runs."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def public_names(module: ModuleType) -> list[str]:
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return sorted(exported)
    source = Path(inspect.getfile(module)).read_text()
    defined: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
    return sorted(
        name
        for name in defined
        if not name.startswith("_") and not isinstance(getattr(module, name, None), (logging.Logger, ModuleType))
    )


def signature_problems(old: Callable[..., Any], new: Callable[..., Any]) -> list[str]:
    """What a call written for ``old`` could do that ``new`` refuses (or answers with other defaults)."""
    try:
        old_signature, new_signature = inspect.signature(old), inspect.signature(new)
    except (TypeError, ValueError):
        return []
    old_params = list(old_signature.parameters.values())
    new_params = list(new_signature.parameters.values())
    new_by_name = {param.name: param for param in new_params if param.kind not in _VARIADIC}
    new_kinds = {param.kind for param in new_params}
    new_positional = [param for param in new_params if param.kind in _POSITIONAL]
    problems: list[str] = []
    matched: set[str] = set()
    for position, param in enumerate(p for p in old_params if p.kind in _POSITIONAL):
        if position >= len(new_positional):
            if inspect.Parameter.VAR_POSITIONAL not in new_kinds:
                problems.append(f"positional parameter {position} ({param.name}) is not accepted")
            continue
        counterpart = new_positional[position]
        matched.add(counterpart.name)
        if param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and counterpart.name != param.name:
            problems.append(f"parameter {position} is named {counterpart.name!r}; 0.1.4 names it {param.name!r}")
        problems += _default_problems(param, counterpart)
    for param in old_params:
        if param.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        counterpart = new_by_name.get(param.name)
        if counterpart is None or counterpart.kind is inspect.Parameter.POSITIONAL_ONLY:
            if inspect.Parameter.VAR_KEYWORD not in new_kinds:
                problems.append(f"keyword {param.name!r} is not accepted")
            continue
        matched.add(counterpart.name)
        problems += _default_problems(param, counterpart)
    for kind in _VARIADIC:
        if any(p.kind is kind for p in old_params) and kind not in new_kinds:
            problems.append(f"no {'*args' if kind is inspect.Parameter.VAR_POSITIONAL else '**kwargs'}")
    problems += [
        f"new required parameter {param.name!r}"
        for param in new_params
        if param.name not in matched and param.kind not in _VARIADIC and param.default is _EMPTY
    ]
    return problems


def _default_problems(old: inspect.Parameter, new: inspect.Parameter) -> list[str]:
    if old.default is _EMPTY:
        return []
    if new.default is _EMPTY:
        return [f"{old.name!r} is required; 0.1.4 defaults it to {old.default!r}"]
    if isinstance(old.default, _SIMPLE) and isinstance(new.default, _SIMPLE) and old.default != new.default:
        return [f"{old.name!r} defaults to {new.default!r}; 0.1.4: {old.default!r}"]
    return []


def _canonical(module_name: str, name: str, obj: Any) -> str:
    """One name per object, so a class re-exported by several modules is compared (and listed) once."""
    owner = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(owner, str) and owner.startswith("prime_runs") and isinstance(qualname, str):
        return f"{owner}.{qualname}"
    return f"{module_name}.{name}"


def _literal_values(obj: Any) -> tuple[Any, ...] | None:
    return typing.get_args(obj) if typing.get_origin(obj) is typing.Literal else None


def _members(cls: type, instance: Any = None) -> set[str]:
    source = instance if instance is not None else cls
    names = {name for name in dir(source) if not name.startswith("_")}
    return names | {name for name in _PROTOCOL_MEMBERS if hasattr(cls, name)}


def _disabled_runs() -> tuple[Any, Any]:
    import prime_runs

    import prime_otel

    return prime_runs.init(mode="disabled"), prime_otel.init(mode="disabled")


def compare_objects(name: str, old: Any, new: Any) -> Iterator[Difference]:
    if old is new:
        return
    literal = _literal_values(old)
    if literal is not None:
        values = _literal_values(new)
        if values is None or not set(literal) <= set(values):
            yield Difference(name, "values", f"{values} does not hold 0.1.4's {literal}")
        return
    if inspect.isclass(old):
        if not inspect.isclass(new):
            yield Difference(name, "kind of object", f"{type(new).__name__}, 0.1.4 has a class")
            return
        yield from _compare_classes(name, old, new)
        return
    if callable(old):
        problems = signature_problems(old, new) if callable(new) else ["not callable"]
        if problems:
            yield Difference(name, "signature", "; ".join(problems))
        return
    if isinstance(old, _SIMPLE) and old != new:
        yield Difference(name, "value", f"{new!r}; 0.1.4: {old!r}")


def _compare_classes(name: str, old: type, new: type) -> Iterator[Difference]:
    if issubclass(old, enum.Enum):
        old_members = [(m.name, m.value) for m in old]  # type: ignore[var-annotated]
        new_members = [(m.name, m.value) for m in new] if issubclass(new, enum.Enum) else []  # type: ignore[var-annotated]
        if old_members != new_members:
            yield Difference(name, "members", f"{new_members}; 0.1.4: {old_members}")
        old_str = [str(m) for m in old]  # type: ignore[var-annotated]
        new_str = [str(m) for m in new] if issubclass(new, enum.Enum) else []  # type: ignore[var-annotated]
        if old_str != new_str:
            yield Difference(name, "str()", f"{new_str}; 0.1.4: {old_str}")
    if typing.is_typeddict(old):
        if set(old.__annotations__) != set(getattr(new, "__annotations__", {})):
            yield Difference(name, "keys", f"{sorted(new.__annotations__)}; 0.1.4: {sorted(old.__annotations__)}")
        return
    old_bases = {base.__name__ for base in old.__mro__[1:] if base.__module__.startswith("prime_runs")}
    new_bases = {base.__name__ for base in new.__mro__[1:]}
    if not old_bases <= new_bases:
        yield Difference(name, "bases", f"not a subclass of {sorted(old_bases - new_bases)}")
    if dataclasses.is_dataclass(old) and not _frozen(old) and _frozen(new):
        yield Difference(name, "frozen", "a frozen dataclass; 0.1.4's fields can be assigned")
    if issubclass(old, BaseException) or issubclass(old, enum.Enum):
        return
    if old.__name__ == "Run":
        old_run, new_run = _disabled_runs()
        old_members, new_members = _members(old, old_run), _members(new, new_run)
        old_run.finish()
        new_run.finish()
    else:
        old_members, new_members = _members(old), _members(new)
    problems = signature_problems(old, new)
    if problems:
        yield Difference(f"{name}()", "signature", "; ".join(problems))
    for member in sorted(old_members):
        if member not in new_members:
            yield Difference(f"{name}.{member}", "not provided", "")
            continue
        old_attr, new_attr = inspect.getattr_static(old, member, None), inspect.getattr_static(new, member, None)
        if _is_method(old_attr) != _is_method(new_attr):
            yield Difference(f"{name}.{member}", "kind of member", "a method on one side, a value on the other")
        elif _is_method(old_attr):
            problems = signature_problems(getattr(old, member), getattr(new, member))
            if problems:
                yield Difference(f"{name}.{member}", "signature", "; ".join(problems))


def _is_method(attribute: Any) -> bool:
    """A function, classmethod or staticmethod; a property, a class attribute or an instance attribute is a value."""
    return inspect.isfunction(attribute) or isinstance(attribute, (classmethod, staticmethod))


def _frozen(cls: type) -> bool:
    params = getattr(cls, "__dataclass_params__", None)
    return bool(params is not None and params.frozen)


def differences() -> list[Difference]:
    found: list[Difference] = []
    seen: set[str] = set()
    missing_packages: list[str] = []
    for module_name in released_modules():
        if any(module_name.startswith(package + ".") for package in missing_packages):
            continue
        target = MODULES.get(module_name)
        if target is None:
            missing_packages.append(module_name)
            found.append(Difference(module_name, "module not provided", ""))
            continue
        old_module, new_module = importlib.import_module(module_name), importlib.import_module(target)
        for name in public_names(old_module):
            old = getattr(old_module, name)
            if not hasattr(new_module, name):
                found.append(Difference(f"{module_name}.{name}", "not provided", f"not in {target}"))
                continue
            canonical = _canonical(module_name, name, old)
            if canonical in seen:
                continue
            seen.add(canonical)
            found.extend(compare_objects(canonical, old, getattr(new_module, name)))
    return found


if __name__ == "__main__":
    for difference in differences():
        print(f"| `{difference.name}` | {difference.kind} | {difference.detail} |")
