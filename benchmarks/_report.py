"""Side-by-side sections: each metric's median over rounds for both SDKs, the ratio, and the issue's target."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks._stats import median

THEIRS = "prime-runs 0.1.4"
OURS = "ours"


@dataclass(frozen=True)
class Target:
    """A goal from the issues, on the ratio ours/0.1.4 (``ratio_at_most``) or on our value (``ours_below``)."""

    text: str
    ratio_at_most: float | None = None
    ours_below: float | None = None

    def met(self, ours: float | None, ratio: float | None) -> bool | None:
        if self.ratio_at_most is not None:
            return None if ratio is None else ratio <= self.ratio_at_most
        if self.ours_below is not None:
            return None if ours is None else ours < self.ours_below
        return None


@dataclass(frozen=True)
class Metric:
    label: str
    value: Callable[[dict[str, Any]], float | None]
    digits: int = 1
    target: Target | None = None


@dataclass(frozen=True)
class Row:
    label: str
    theirs: float | None
    ours: float | None
    digits: int
    target: Target | None

    @property
    def ratio(self) -> float | None:
        if self.theirs is None or self.ours is None or self.theirs == 0:
            return None
        return self.ours / self.theirs

    @property
    def met(self) -> bool | None:
        return self.target.met(self.ours, self.ratio) if self.target else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.label,
            "prime_runs": self.theirs,
            "ours": self.ours,
            "ratio": self.ratio,
            "target": self.target.text if self.target else None,
            "met": self.met,
        }


@dataclass(frozen=True)
class Table:
    """Free-form cells, for figures that are not one value per SDK (a run's progress over time)."""

    headers: tuple[str, ...]
    cells: list[tuple[str, ...]]

    def to_dict(self) -> dict[str, Any]:
        return {"headers": list(self.headers), "cells": [list(row) for row in self.cells]}


@dataclass
class Section:
    title: str
    notes: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    columns: tuple[str, str] = (THEIRS, OURS)
    tables: list[Table] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "notes": self.notes,
            "rows": [row.to_dict() for row in self.rows],
            "tables": [table.to_dict() for table in self.tables],
        }


def errors_note(runs: Sequence[dict[str, Any]]) -> list[str]:
    """A warning line naming every run whose SDK noted an error (a failed upload makes its numbers suspect)."""
    noted = [f"{run['run_id']}: {run['errors'][0]}" for run in runs if run.get("errors")]
    return [f"WARNING: runs with errors: {'; '.join(noted)}"] if noted else []


def median_of(runs: Sequence[dict[str, Any]], metric: Metric) -> float | None:
    values = [value for value in (metric.value(run) for run in runs) if value is not None]
    return median(values) if values else None


def compare(metrics: Sequence[Metric], theirs: Sequence[dict[str, Any]], ours: Sequence[dict[str, Any]]) -> list[Row]:
    return [Row(m.label, median_of(theirs, m), median_of(ours, m), m.digits, m.target) for m in metrics]


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _ratio(row: Row) -> str:
    return "-" if row.ratio is None else f"{row.ratio:.2f}x"


def _target(row: Row) -> str:
    if row.target is None:
        return ""
    verdict = {True: "met", False: "MISSED", None: "n/a"}[row.met]
    return f"{row.target.text}  {verdict}"


def _text_table(table: Table) -> list[str]:
    """The first column (what a row is) left-aligned, the figures right-aligned."""
    widths = [max(len(cell) for cell in column) for column in zip(table.headers, *table.cells, strict=True)]
    return [
        "",
        *(
            "   "
            + "  ".join([row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))])
            for row in (table.headers, *table.cells)
        ),
    ]


def _markdown_table(table: Table) -> list[str]:
    return [
        "",
        "| " + " | ".join(table.headers) + " |",
        "|---|" + "---:|" * (len(table.headers) - 1),
        *("| " + " | ".join(row) + " |" for row in table.cells),
    ]


def render_text(sections: Sequence[Section]) -> str:
    lines: list[str] = []
    for section in sections:
        lines += ["", f"== {section.title}", *(f"   {note}" for note in section.notes)]
        for table in section.tables:
            lines += _text_table(table)
        if not section.rows:
            continue
        theirs, ours = section.columns
        lines.append(f"{'metric':38} {theirs:>17} {ours:>12} {'ours/0.1.4':>11}   target")
        for row in section.rows:
            lines.append(
                f"{row.label:38} {_number(row.theirs, row.digits):>17} {_number(row.ours, row.digits):>12} "
                f"{_ratio(row):>11}   {_target(row)}".rstrip()
            )
    return "\n".join(lines).lstrip("\n")


def render_markdown(sections: Sequence[Section], preamble: Sequence[str]) -> str:
    lines = [*preamble]
    for section in sections:
        lines += ["", f"### {section.title}", ""]
        lines += [f"{note}  " for note in section.notes]
        for table in section.tables:
            lines += _markdown_table(table)
        if not section.rows:
            continue
        theirs, ours = section.columns
        lines += ["", f"| metric | {theirs} | {ours} | ours/0.1.4 | target |", "|---|---:|---:|---:|---|"]
        for row in section.rows:
            label = row.label.strip()
            label = "&emsp;" + label if row.label.startswith(" ") else label  # markdown drops leading spaces
            cells = [label, _number(row.theirs, row.digits), _number(row.ours, row.digits), _ratio(row)]
            lines.append("| " + " | ".join([*cells, _target(row)]) + " |")
    return "\n".join(lines) + "\n"
