"""No six lines of code appear twice in the package: logic written twice drifts apart, so it is written once and
called. The scan works like pylint's ``duplicate-code`` check with ``--min-similarity-lines=6``: comments,
docstrings, imports and function signatures are left out, every other line is compared with its indentation
stripped, and six consecutive equal lines in two places are a copy.

Similarities accepted on purpose are listed in ``ACCEPTED`` with the reason; an accepted one that no longer
occurs fails the test too, so the list stays true.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "prime_otel"
MIN_LINES = 6

#: The first line of an accepted copy (as compared: stripped) -> why it stays.
ACCEPTED: dict[str, str] = {}


_NOT_CODE = frozenset(
    {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
)


@dataclass(frozen=True)
class _Line:
    path: Path
    number: int
    index: int  # its position among the file's compared lines
    text: str


def _left_out(tree: ast.Module) -> set[int]:
    """Line numbers of docstrings, imports, ``__all__`` lists and function signatures (up to the colon): like
    imports, an ``__all__`` list declares names (a re-export module names the same ones), it holds no logic."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) or _declares_all(node):
            skipped.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                skipped.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first_statement = node.body[0].lineno
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            skipped.update(range(start, first_statement))
    return skipped


def _declares_all(node: ast.AST) -> bool:
    return isinstance(node, ast.Assign) and any(
        isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
    )


def _code_lines(path: Path) -> list[_Line]:
    """The lines the scan compares: each line's code tokens (no comments), joined by single spaces."""
    source = path.read_text(encoding="utf-8")
    skipped = _left_out(ast.parse(source, str(path)))
    tokens: dict[int, list[str]] = defaultdict(list)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in _NOT_CODE or token.start[0] in skipped:
            continue
        tokens[token.start[0]].append(token.string)
    return [_Line(path, number, index, " ".join(tokens[number])) for index, number in enumerate(sorted(tokens))]


def _copies() -> dict[tuple[str, ...], list[_Line]]:
    """Every window of ``MIN_LINES`` compared lines found in more than one place: window -> its first lines."""
    places: dict[tuple[str, ...], list[_Line]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = _code_lines(path)
        for start in range(len(lines) - MIN_LINES + 1):
            window = tuple(line.text for line in lines[start : start + MIN_LINES])
            places[window].append(lines[start])
    return {window: found for window, found in places.items() if _distinct(found)}


def _distinct(found: list[_Line]) -> bool:
    """Two places that do not overlap (a window repeated within one run of equal lines is not a copy)."""
    first = found[0]
    return any(other.path != first.path or other.index - first.index >= MIN_LINES for other in found[1:])


def _report(copies: dict[tuple[str, ...], list[_Line]]) -> list[str]:
    """One entry per copy: a window whose places all continue another copy's places is part of that copy."""
    places = {frozenset((line.path, line.index) for line in found) for found in copies.values()}
    entries = []
    for window, found in copies.items():
        if frozenset((line.path, line.index - 1) for line in found) in places:
            continue
        where = ", ".join(f"{line.path.relative_to(PACKAGE.parent)}:{line.number}" for line in found)
        entries.append(f"{where}: {window[0]!r} ...")
    return sorted(entries)


def test_no_six_lines_of_code_appear_twice_in_the_package() -> None:
    copies = {window: found for window, found in _copies().items() if window[0] not in ACCEPTED}
    assert _report(copies) == []


def test_every_accepted_similarity_still_occurs() -> None:
    first_lines = {window[0] for window in _copies()}
    assert sorted(set(ACCEPTED) - first_lines) == []


def test_the_scan_finds_six_equal_lines_in_two_functions(tmp_path: Path) -> None:
    """The scan itself: a copy differing only in comments, indentation and docstrings is found."""
    body = ["total = 0", "for item in items:", "    total += item", "if total > 10:", "    total = 10", "print(total)"]
    first = "def a(items):\n    '''A.'''\n" + "".join(f"    {line}\n" for line in body)
    second = "class B:\n    def b(self, items):\n" + "".join(f"        {line}  # note\n" for line in body)
    (tmp_path / "one.py").write_text(first)
    (tmp_path / "two.py").write_text(second)
    one, two = _code_lines(tmp_path / "one.py"), _code_lines(tmp_path / "two.py")
    assert [line.text for line in one] == [line.text for line in two][-MIN_LINES:]
    assert len(one) == MIN_LINES  # the signature and the docstring are left out
