"""Code, tests and docs state their rules in words: no file cites the behaviour checklist or the platform contract,
documents a clone of this repository does not have."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ["prime_otel", "tests", "benchmarks", "examples", "README.md"]

# Built from pieces so that this file does not match itself.
FORBIDDEN = re.compile(
    "|".join(
        [
            r"\bRB" + "-" + r"\d+",  # a checklist number
            "run" + "-" + r"behaviou?r",  # the checklist document
            "platform" + "-" + "contract",  # the platform contract document
        ]
    ),
    re.IGNORECASE,
)


def _files() -> list[Path]:
    found: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        found += [p for p in candidates if "__pycache__" not in p.parts and p.suffix != ".pyc"]
    return found


def test_the_scan_covers_the_package_and_the_tests() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in _files()}
    assert {"prime_otel/__init__.py", "README.md", "tests/test_no_checklist_numbers.py"} <= names


def test_no_file_cites_a_checklist_number_or_an_unshipped_document() -> None:
    hits = []
    for path in _files():
        text = path.read_bytes().decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            match = FORBIDDEN.search(line)
            if match:
                hits.append(f"{path.relative_to(ROOT)}:{number}: {match.group()}")
    assert hits == [], "say the rule in words instead:\n" + "\n".join(hits)


def test_the_patterns_catch_what_they_forbid() -> None:
    for cited in ["RB" + "-026", "see run" + "-behaviour §3", "Run" + "-Behavior", "platform" + "-contract §5.6"]:
        assert FORBIDDEN.search(cited), cited
    for fine in ["RB-x", "a run-level summary", "the platform's contract", "ORB" + "-1"]:
        assert not FORBIDDEN.search(fine), fine
