"""Reading an evaluation's stored samples back, page by page, against the local platform.

A row counts as stored when its (sample_id, rollout_number) is found exactly as often as it was sent; as absent
only when the whole table was read, every stored row carried a key, and it was not found. Anything else is
undecided (another writer stored the same row, or the platform returns rows the read cannot recognise).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from prime_otel._types import EnvironmentRef
from prime_otel.client import EvaluationsAPI, PlatformHTTP, StoredSamples, build_create_body, sample_key
from prime_otel.testing import LocalPlatform


@pytest.fixture
def api(local_platform_session: LocalPlatform) -> Iterator[EvaluationsAPI]:
    http = PlatformHTTP(api_key=local_platform_session.api_key, base_url=local_platform_session.url)
    yield EvaluationsAPI(http)
    http.close()
    local_platform_session.reset()


def _evaluation(api: EvaluationsAPI) -> str:
    environments = api.resolve_environments([EnvironmentRef(name="gsm8k")], None)
    created = api.create(build_create_body(f"readback-{secrets.token_hex(4)}", environments, []))
    return str(created["evaluation_id"])


def _row(sample_id: str, rollout: int | None = 1) -> dict[str, Any]:
    row: dict[str, Any] = {"sample_id": sample_id, "reward": 0.5}
    if rollout is not None:
        row["rollout_number"] = rollout
    return row


def test_rows_stored_once_are_found_on_every_page_and_rows_never_sent_are_proven_absent(api: EvaluationsAPI) -> None:
    evaluation_id = _evaluation(api)
    api.append_samples(evaluation_id, [_row(f"s{i}") for i in range(150)])  # two pages of 100
    stored = StoredSamples.read(api, evaluation_id)
    assert stored.complete
    keys = [sample_key(_row("s0")), sample_key(_row("s149")), sample_key(_row("s7", rollout=2)), sample_key(_row("x"))]
    assert stored.stored(keys) == [True, True, False, False]


def test_a_row_stored_more_often_than_it_was_sent_is_undecided(api: EvaluationsAPI) -> None:
    evaluation_id = _evaluation(api)
    api.append_samples(evaluation_id, [_row("a"), _row("a"), _row("b")])
    stored = StoredSamples.read(api, evaluation_id)
    assert stored.stored([sample_key(_row("a"))]) == [None]  # someone else may have sent the same row
    assert stored.stored([sample_key(_row("a")), sample_key(_row("a"))]) == [True, True]
    assert stored.stored([sample_key(_row("b"))]) == [True]


def test_a_stored_row_without_a_key_leaves_every_absence_unproven(api: EvaluationsAPI) -> None:
    evaluation_id = _evaluation(api)
    api.append_samples(evaluation_id, [_row("a"), _row("keyless", rollout=None)])
    stored = StoredSamples.read(api, evaluation_id)
    assert not stored.complete
    assert stored.stored([sample_key(_row("a")), sample_key(_row("c"))]) == [True, None]
    assert sample_key(_row("keyless", rollout=None)) is None


def test_a_table_larger_than_the_read_limit_proves_nothing_absent(api: EvaluationsAPI) -> None:
    evaluation_id = _evaluation(api)
    api.append_samples(evaluation_id, [_row(f"s{i}") for i in range(250)])
    stored = StoredSamples.read(api, evaluation_id, max_rows=200)
    assert not stored.complete
    assert stored.stored([sample_key(_row("s0")), sample_key(_row("new"))]) == [True, None]
