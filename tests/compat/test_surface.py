"""Every public name of the installed prime-runs 0.1.4 is in prime-otel with a signature a 0.1.4 caller can use,
or its difference is a row of docs/differences-from-prime-runs.md (and every row there is still a difference)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.compat._surface import differences, signature_problems

DOC = Path(__file__).resolve().parents[2] / "docs" / "differences-from-prime-runs.md"
_ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| (?P<kind>[^|]+?) \| (?P<why>.+) \|$")


def documented() -> dict[str, str]:
    """The surface table: name -> kind of difference (every row also says why)."""
    rows = {}
    for line in DOC.read_text().splitlines():
        match = _ROW.match(line)
        if match and match["why"].strip():
            rows[match["name"]] = match["kind"].strip()
    return rows


def test_every_difference_from_prime_runs_is_documented_and_every_documented_one_is_real() -> None:
    table = documented()
    found = {(d.name, d.kind): d for d in differences()}
    undocumented = [d for (name, kind), d in found.items() if table.get(name) != kind]
    stale = [f"{name} ({kind})" for name, kind in table.items() if (name, kind) not in found]
    assert not undocumented, "differences from prime-runs 0.1.4 missing from the table:\n" + "\n".join(
        f"| `{d.name}` | {d.kind} | {d.detail} |" for d in undocumented
    )
    assert not stale, f"rows of {DOC.name} that are no longer a difference: {stale}"


def test_the_names_prime_runs_callers_pass_by_keyword_are_accepted(tmp_path: Path) -> None:
    """The keyword names that differed before (a call written for 0.1.4 raised TypeError) now match."""
    import prime_runs

    import prime_otel

    pairs = [
        (prime_runs.projection.batch_samples, prime_otel.projection.batch_samples),
        (prime_runs.projection.episode_to_samples, prime_otel.projection.episode_to_samples),
        (prime_runs.ConfigSource.from_mapping, prime_otel.ConfigSource.from_mapping),
        (prime_runs.ConfigSource.coerce, prime_otel.ConfigSource.coerce),
        (prime_runs.projection.json_bytes, prime_otel.projection.json_bytes),
        (prime_runs.init, prime_otel.init),
    ]
    assert {old.__qualname__: signature_problems(old, new) for old, new in pairs} == {
        old.__qualname__: [] for old, _ in pairs
    }
    rows = [{"sample_id": "a", "reward": 1.0}]
    assert prime_otel.projection.batch_samples(samples=rows) == prime_runs.projection.batch_samples(samples=rows)
    source = prime_otel.ConfigSource.from_mapping(value={"text": "x = 1", "format": "toml"})
    assert source == prime_otel.ConfigSource(text="x = 1")
    row = {"sample_id": "é", "reward": 0.5, "metrics": {"turns": 2}}
    assert prime_otel.projection.json_bytes(row) == prime_runs.projection.json_bytes(row)
    # A NaN is sent as null, so it counts as null (0.1.4 raised ValueError here).
    assert prime_otel.projection.json_bytes({"reward": float("nan")}) == len(b'{"reward":null}')
    launched = tmp_path / "eval.toml"
    launched.write_text("model = 'Qwen/Qwen3-8B'\n")
    coerced = prime_otel.ConfigSource.coerce(launched)
    assert coerced is not None and coerced.to_dict() == prime_runs.ConfigSource.coerce(launched).to_dict()


def test_the_checker_sees_a_renamed_keyword_a_missing_default_and_a_new_required_parameter() -> None:
    def released(samples: list[int], *, limit: int = 3) -> None: ...

    def renamed(rows: list[int], *, limit: int = 3) -> None: ...

    def stricter(samples: list[int], *, limit: int, strict: bool) -> None: ...

    assert signature_problems(released, renamed) == ["parameter 0 is named 'rows'; 0.1.4 names it 'samples'"]
    assert signature_problems(released, stricter) == [
        "'limit' is required; 0.1.4 defaults it to 3",
        "new required parameter 'strict'",
    ]
