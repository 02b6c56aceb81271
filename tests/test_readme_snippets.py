"""The README's Python snippets run as written against the local platform, with only the environment the README
tells a user to set. A block that is deliberately not runnable says so right above it with
``<!-- not-run: <reason> -->``; this test counts those and holds them to a reason."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from prime_otel.testing import LocalPlatform

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
NOT_RUN = re.compile(r"<!--\s*not-run:\s*(.*?)\s*-->\s*$")
HEADING = re.compile(r"^#+ (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class Snippet:
    section: str
    number: int
    code: str
    not_run_reason: str | None

    @property
    def name(self) -> str:
        return f"{self.section} #{self.number}"


def readme_snippets(text: str) -> list[Snippet]:
    snippets: list[Snippet] = []
    for match in FENCE.finditer(text):
        before = text[: match.start()]
        headings = HEADING.findall(before)
        section = headings[-1] if headings else "(top)"
        previous = before.rstrip("\n").rsplit("\n", 1)[-1]
        marker = NOT_RUN.search(previous)
        number = sum(1 for snippet in snippets if snippet.section == section) + 1
        snippets.append(Snippet(section, number, match.group(1), marker.group(1) if marker else None))
    return snippets


SNIPPETS = readme_snippets(README.read_text(encoding="utf-8"))
RUNNABLE = [snippet for snippet in SNIPPETS if snippet.not_run_reason is None]


def test_the_use_it_snippet_is_run_and_every_skipped_block_says_why() -> None:
    assert any(snippet.section == "Use it" for snippet in RUNNABLE), "the Use it snippet must run as written"
    skipped = [snippet for snippet in SNIPPETS if snippet.not_run_reason is not None]
    assert all(snippet.not_run_reason for snippet in skipped), [snippet.name for snippet in skipped]
    assert len(RUNNABLE) + len(skipped) == len(SNIPPETS) == README.read_text().count("```python")


def test_the_extractor_sees_markers_and_sections() -> None:
    text = "## A\n\n```python\nprint(1)\n```\n\n## B\n<!-- not-run: needs a GPU -->\n```python\nimport torch\n```\n"
    assert readme_snippets(text) == [
        Snippet("A", 1, "print(1)\n", None),
        Snippet("B", 1, "import torch\n", "needs a GPU"),
    ]


@pytest.mark.parametrize("snippet", RUNNABLE, ids=lambda snippet: snippet.name)
def test_a_readme_snippet_runs_as_written(
    snippet: Snippet, local_platform_session: LocalPlatform, tmp_path: Path
) -> None:
    """Run as a user would: a fresh folder, the local platform's key and URLs, a team (as the README's local
    platform section exports), nothing else of the test process's state."""
    before = {run["id"] for run in local_platform_session.inspect.runs()}
    script = tmp_path / "snippet.py"
    script.write_text(snippet.code, encoding="utf-8")
    env = {
        **{name: value for name, value in os.environ.items() if not name.startswith(("PRIME_", "OTEL_"))},
        **local_platform_session.env,
        "PRIME_TEAM_ID": "team_local",
        "HOME": str(tmp_path),
        "PRIME_RUNS_DIR": str(tmp_path / "prime-runs"),
        "PYTHONPATH": str(ROOT),
    }
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, f"{snippet.name} failed:\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr
    made = [run for run in local_platform_session.inspect.runs() if run["id"] not in before]
    offline = list((tmp_path / "prime-runs").glob("*/run.json"))
    assert made or offline, f"{snippet.name} made no run on the platform and no offline run"
    for run in made:
        assert run["status"] in ("PROCESSING", "COMPLETED"), run
