"""What a person sees in the local platform's viewer, driven in real headless Chromium."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from ._seed import EVAL_TOML, FAILED_MESSAGE, FAILED_NAME, PlatformAPI, Seeded, fixture_json

pytestmark = pytest.mark.browser


def shown(value: float) -> str:
    """A number as the viewer prints it: integers bare, others to at most 4 decimals."""
    return str(int(value)) if float(value).is_integer() else f"{value:.4f}".rstrip("0")


def open_runs(page: Page, seeded: Seeded) -> None:
    page.goto(f"{seeded.url}/#key={seeded.api_key}")
    expect(page.get_by_test_id("runs-table")).to_be_visible()


def run_row(page: Page, run_id: str) -> Locator:
    return page.locator(f'[data-testid="run-row"][data-run-id="{run_id}"]')


def open_run(page: Page, seeded: Seeded, run_id: str, tab: str | None = None) -> None:
    open_runs(page, seeded)
    run_row(page, run_id).get_by_test_id("run-name").click()
    expect(page.get_by_test_id("run-id")).to_have_text(run_id)
    if tab:
        page.get_by_test_id(f"tab-{tab}").click()


def column(table: Locator, row_testid: str, name: str) -> list[str]:
    return table.locator(f'[data-testid="{row_testid}"] td[data-col="{name}"]').all_inner_texts()


def polyline_vertices(page: Page) -> list[tuple[float, float]]:
    points = page.get_by_test_id("metrics-line").get_attribute("points") or ""
    return [(float(x), float(y)) for x, y in (pair.split(",") for pair in points.split())]


def test_runs_list_shows_every_run_with_a_coloured_status(page: Page, seeded: Seeded, artifacts: Path) -> None:
    open_runs(page, seeded)

    expected = {seeded.eval_id: "COMPLETED", seeded.train_id: "RUNNING", seeded.failed_id: "FAILED"}
    for run_id, status in expected.items():
        expect(run_row(page, run_id).get_by_test_id("run-status")).to_have_text(status)
    colours = {
        run_row(page, run_id).get_by_test_id("run-status").evaluate("e => getComputedStyle(e).backgroundColor")
        for run_id in expected
    }
    assert len(colours) == 3
    eval_row = run_row(page, seeded.eval_id)
    expect(eval_row.get_by_test_id("run-name")).to_have_text(seeded.eval_name)
    expect(eval_row.get_by_test_id("run-samples")).to_have_text("3")
    expect(eval_row.get_by_test_id("run-episodes")).to_have_text("3")
    train_row = run_row(page, seeded.train_id)
    expect(train_row.get_by_test_id("run-kind")).to_have_text("train")
    expect(train_row.get_by_test_id("run-episodes")).to_have_text("3")
    expect(page.get_by_test_id("runs-refresh")).to_contain_text("Auto-refreshing")
    page.screenshot(path=str(artifacts / "runs-list.png"), full_page=True)


def test_untrusted_names_and_errors_are_shown_as_text(page: Page, seeded: Seeded) -> None:
    open_runs(page, seeded)
    expect(run_row(page, seeded.failed_id).get_by_test_id("run-name")).to_have_text(FAILED_NAME)

    run_row(page, seeded.failed_id).get_by_test_id("run-name").click()
    expect(page.get_by_test_id("run-status")).to_have_text("FAILED")
    expect(page.get_by_test_id("run-name")).to_have_text(FAILED_NAME)
    assert page.get_by_test_id("run-error").text_content() == FAILED_MESSAGE
    assert page.locator("main img, main script, main b").count() == 0
    assert page.title() != "pwned"


def test_key_leaves_the_address_bar_and_stays_with_the_tab(page: Page, seeded: Seeded) -> None:
    open_runs(page, seeded)
    assert "key=" not in page.url
    assert seeded.api_key not in page.url

    page.reload()
    expect(page.get_by_test_id("runs-table")).to_be_visible()
    expect(page.get_by_test_id("key-form")).to_have_count(0)


def test_without_a_key_the_page_asks_for_one_and_requests_nothing(page: Page, seeded: Seeded) -> None:
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"{seeded.url}/")
    expect(page.get_by_test_id("key-form")).to_be_visible()
    assert not [url for url in requested if "/_local/" in url]

    page.get_by_test_id("key-input").fill(seeded.api_key)
    page.get_by_test_id("key-submit").click()
    expect(run_row(page, seeded.eval_id)).to_be_visible()


def test_a_wrong_key_shows_the_key_form_not_data(page: Page, seeded: Seeded) -> None:
    page.goto(f"{seeded.url}/#key=pit_local_wrong")

    expect(page.get_by_test_id("key-form")).to_be_visible()
    expect(page.get_by_test_id("key-error")).to_contain_text("rejected")
    expect(page.get_by_test_id("runs-table")).to_have_count(0)
    assert seeded.eval_name not in page.content()

    page.get_by_test_id("key-input").fill(seeded.api_key)
    page.get_by_test_id("key-submit").click()
    expect(run_row(page, seeded.eval_id)).to_be_visible()


def test_eval_run_page_shows_its_samples_with_rewards(page: Page, seeded: Seeded, artifacts: Path) -> None:
    open_run(page, seeded, seeded.eval_id)

    expect(page.get_by_test_id("run-status")).to_have_text("COMPLETED")
    expect(page.get_by_test_id("run-model")).to_have_text("Qwen/Qwen3-8B")
    expect(page.get_by_test_id("run-framework")).to_have_text("verifiers")
    expect(page.get_by_test_id("tab-samples")).to_have_attribute("aria-selected", "true")
    table = page.get_by_test_id("samples-table")
    expect(table.get_by_test_id("sample-row")).to_have_count(len(seeded.eval_samples))
    shown_rewards = dict(
        zip(column(table, "sample-row", "example_id"), column(table, "sample-row", "reward"), strict=True)
    )
    assert shown_rewards == {str(s["example_id"]): shown(s["reward"]) for s in seeded.eval_samples}
    assert sorted(column(table, "sample-row", "stop_condition")) == sorted(
        s["stop_condition"] for s in seeded.eval_samples
    )
    expect(table).to_contain_text("Altogether: 48 + 24 = 72")
    expect(table.get_by_test_id("sample-error")).to_have_text(
        "ProviderError: upstream returned 503: no healthy upstream"
    )

    first = table.get_by_test_id("sample-row").first
    first.click()
    expect(table.get_by_test_id("sample-row-json").first).to_be_visible()
    expect(table.get_by_test_id("sample-row-json").first).to_contain_text('"sample_id"')
    page.screenshot(path=str(artifacts / "eval-run-samples.png"), full_page=True)


def test_config_tab_shows_the_launched_file_verbatim(page: Page, seeded: Seeded, artifacts: Path) -> None:
    open_run(page, seeded, seeded.eval_id, tab="config")

    source = page.get_by_test_id("config-source")
    expect(source).to_be_visible()
    assert source.text_content() == EVAL_TOML
    assert source.locator("*").count() == 0
    expect(page.get_by_test_id("config-filename")).to_have_text("eval.toml")
    expect(page.get_by_test_id("config-format")).to_have_text("toml")
    page.screenshot(path=str(artifacts / "eval-run-config.png"), full_page=True)


def test_config_tab_falls_back_to_the_config_document(page: Page, seeded: Seeded) -> None:
    open_run(page, seeded, seeded.failed_id, tab="config")

    expect(page.get_by_test_id("config-source")).to_have_count(0)
    expect(page.get_by_test_id("config-json")).to_contain_text('"rollouts_per_example": 4')


def test_the_runs_viewer_url_opens_that_run(page: Page, seeded: Seeded) -> None:
    page.goto(f"{seeded.eval_viewer_url}#key={seeded.api_key}")

    expect(page.get_by_test_id("run-id")).to_have_text(seeded.eval_id)
    expect(page.get_by_test_id("samples-table").get_by_test_id("sample-row")).to_have_count(3)
    assert "key=" not in page.url


def test_episodes_tab_lists_episodes_with_summary_rewards(page: Page, seeded: Seeded) -> None:
    open_run(page, seeded, seeded.eval_id, tab="episodes")

    table = page.get_by_test_id("episodes-table")
    expect(table.get_by_test_id("episode-row")).to_have_count(3)
    rows = zip(
        column(table, "episode-row", "id"),
        column(table, "episode-row", "env"),
        column(table, "episode-row", "ok"),
        column(table, "episode-row", "traces"),
        column(table, "episode-row", "reward"),
        strict=True,
    )
    # Episode 2's only reward was never scored (null) and episode 3's judge seat is not trainable.
    assert sorted(rows) == sorted(
        [
            (seeded.eval_episodes[0]["id"], "gsm8k", "yes", "1", "1"),
            (seeded.eval_episodes[1]["id"], "bash-tasks", "no", "1", "0"),
            (seeded.eval_episodes[2]["id"], "agentic-judge+gsm8k", "yes", "2", "1"),
        ]
    )


def test_summary_tab_shows_summary_metrics_and_request_counts(page: Page, seeded: Seeded) -> None:
    open_run(page, seeded, seeded.eval_id, tab="summary")

    expect(page.get_by_test_id("summary-json")).to_contain_text('"avg_reward": 0.6666666666666666')
    requests = page.get_by_test_id("requests-table")
    samples_row = requests.get_by_test_id("request-row").filter(has_text=re.compile(r"POST .*/samples"))
    expect(samples_row).to_have_count(1)
    expect(samples_row.locator('td[data-col="count"]')).to_have_text("1")


def test_metrics_plot_has_one_point_per_step_and_follows_the_selected_metric(
    page: Page, seeded: Seeded, artifacts: Path
) -> None:
    open_run(page, seeded, seeded.train_id)

    expect(page.get_by_test_id("run-detail-max_steps")).to_have_text("30")
    expect(page.get_by_test_id("tab-metrics")).to_have_attribute("aria-selected", "true")
    select = page.get_by_test_id("metric-select")
    expect(select).to_have_value("reward")
    assert select.locator("option").all_inner_texts() == ["eval/accuracy", "loss", "reward"]
    points = page.get_by_test_id("metrics-point")
    expect(points).to_have_count(len(seeded.train_steps))
    assert [int(s) for s in points.evaluate_all("ps => ps.map(p => p.dataset.step)")] == seeded.train_steps
    reward_line = polyline_vertices(page)
    assert len(reward_line) == len(seeded.train_steps)
    assert reward_line[0][1] > reward_line[-1][1]  # reward rises: the line ends higher on screen
    assert [x for x, _ in reward_line] == sorted(x for x, _ in reward_line)
    x_ticks = [int(t) for t in page.get_by_test_id("plot-x-tick").all_text_contents()]
    assert x_ticks[0] <= seeded.train_steps[0]
    assert x_ticks[-1] >= seeded.train_steps[-1]
    expect(page.get_by_test_id("metrics-table").get_by_test_id("metrics-row")).to_have_count(len(seeded.train_steps))
    page.screenshot(path=str(artifacts / "training-metrics.png"), full_page=True)

    select.select_option("loss")
    expect(points).to_have_count(len(seeded.train_steps))
    loss_line = polyline_vertices(page)
    assert loss_line != reward_line
    assert loss_line[0][1] < loss_line[-1][1]  # loss falls: the line ends lower on screen

    select.select_option("eval/accuracy")
    expect(points).to_have_count(len([s for s in seeded.train_steps if s % 5 == 0]))
    assert len(polyline_vertices(page)) == points.count()


def test_steps_tab_shows_the_parquet_object_and_its_decoded_rows(page: Page, seeded: Seeded) -> None:
    open_run(page, seeded, seeded.train_id, tab="steps")

    section = page.locator('[data-testid="step-section"][data-step="10"]')
    expect(section).to_be_visible()
    objects = section.get_by_test_id("step-object")
    expect(objects).to_have_count(1)
    expect(objects.locator('td[data-col="key"]')).to_have_text(seeded.train_object_key)
    expect(objects.locator('td[data-col="rows"]')).to_have_text("3")

    table = section.get_by_test_id("steps-table")
    expect(table.get_by_test_id("step-row")).to_have_count(3)
    shown_rows = list(
        zip(
            column(table, "step-row", "sample_id"),
            column(table, "step-row", "problem_id"),
            column(table, "step-row", "reward"),
            column(table, "step-row", "advantage"),
            column(table, "step-row", "env_name"),
            strict=True,
        )
    )
    expected = [
        (str(r["sample_id"]), str(r["problem_id"]), shown(r["reward"]), shown(r["advantage"]), r["env_name"])
        for r in seeded.train_rows
    ]
    assert sorted(shown_rows) == sorted(expected)

    table.get_by_test_id("step-row").first.click()
    detail = table.get_by_test_id("step-row-json").first
    expect(detail).to_contain_text('"role": "assistant"')  # the row's JSON-string columns are decoded


def test_samples_are_paged(page: Page, seeded: Seeded, api: PlatformAPI) -> None:
    created = api.create_eval("paged-samples", {"rollouts_per_example": 1})
    template = fixture_json("eval/samples.json")["samples"][0]
    rows: list[dict[str, Any]] = []
    for index in range(60):
        row = copy.deepcopy(template)
        row.update(example_id=index, sample_id=f"s{index:03d}", reward=index / 100)
        rows.append(row)
    api.push_samples(created["evaluation_id"], rows)
    open_run(page, seeded, created["evaluation_id"])

    table_rows = page.get_by_test_id("samples-table").get_by_test_id("sample-row")
    expect(table_rows).to_have_count(50)
    expect(page.get_by_test_id("samples-table-range")).to_have_text("1-50 of 60")
    expect(page.get_by_test_id("samples-table-prev")).to_be_disabled()
    page.get_by_test_id("samples-table-next").click()
    expect(page.get_by_test_id("samples-table-range")).to_have_text("51-60 of 60")
    expect(table_rows).to_have_count(10)
    expect(page.get_by_test_id("samples-table-next")).to_be_disabled()


def test_open_pages_follow_a_run_until_it_closes(page: Page, seeded: Seeded, api: PlatformAPI) -> None:
    listed = api.create_eval("closes-while-listed", {"rollouts_per_example": 1})["evaluation_id"]
    viewed = api.create_eval("fails-while-viewed", {"rollouts_per_example": 1})["evaluation_id"]
    open_runs(page, seeded)
    status = run_row(page, listed).get_by_test_id("run-status")
    expect(status).to_have_text("RUNNING")

    api.call("PUT", f"/evaluations/{listed}", {"status": "CANCELLED"})
    expect(status).to_have_text("CANCELLED")

    run_row(page, viewed).get_by_test_id("run-name").click()
    expect(page.get_by_test_id("run-status")).to_have_text("RUNNING")
    api.call("PUT", f"/evaluations/{viewed}", {"status": "FAILED", "error_message": "crashed: out of memory"})
    expect(page.get_by_test_id("run-status")).to_have_text("FAILED")
    expect(page.get_by_test_id("run-error")).to_have_text("crashed: out of memory")
