"""What a person sees in the local platform's viewer, driven in real headless Chromium."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect

from ._seed import (
    CHAT_TRACE,
    EVAL_TOML,
    FAILED_MESSAGE,
    FAILED_NAME,
    GENAI_EPISODE,
    PlatformAPI,
    Seeded,
    fixture_json,
    metric_row,
    stamped,
    varied,
)

pytestmark = pytest.mark.browser

Screenshot = Callable[[Page, str], Path]
REFRESH_S = 3.0  # the viewer's polling interval while a run is active (views/run.js REFRESH_MS)


def tiny(value: float) -> str | None:
    """Magnitudes under 1e-3 as the viewer prints them: JavaScript's exponent form, e.g. ``1e-6``."""
    if value == 0 or abs(value) >= 1e-3:
        return None
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def shown(value: float, digits: int = 4) -> str:
    """A number as the viewer's tables print it: integers bare, others to at most ``digits`` decimals."""
    if float(value).is_integer():
        return str(int(value))
    return tiny(value) or f"{value:.{digits}f}".rstrip("0")


def card_text(value: float) -> str:
    """A number as the overview's cards print it: thousands separated, three decimals at most."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return tiny(value) or f"{round(value, 3):,}".rstrip("0").rstrip(".")


def percent(value: float) -> str:
    return f"{round(value * 100, 1):g}%"


def summary_trace(episode: dict[str, Any]) -> dict[str, Any]:
    traces = episode["traces"]
    return next((t for t in traces if t["agent"].get("trainable", True)), traces[0])


def reward_of(trace: dict[str, Any]) -> float:
    return sum(r["score"] * r.get("weight", 1.0) for r in trace["rewards"].values() if r)


def tokens_of(episodes: list[dict[str, Any]]) -> int:
    return sum(t["num_input_tokens"] + t["num_output_tokens"] for e in episodes for t in e["traces"])


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
    return table.locator(f'[data-testid="{row_testid}"] > td[data-col="{name}"]').all_inner_texts()


def card_value(scope: Page | Locator, key: str) -> Locator:
    return scope.locator(f'[data-key="{key}"] [data-testid="card-value"]')


def polyline_vertices(panel: Locator) -> list[tuple[float, float]]:
    points = panel.get_by_test_id("metrics-line").get_attribute("points") or ""
    return [(float(x), float(y)) for x, y in (pair.split(",") for pair in points.split())]


def episode_row(page: Page, episode_id: str) -> Locator:
    return page.get_by_test_id("episode-row").filter(has=page.locator(f'code[title="{episode_id}"]'))


# -- runs list ------------------------------------------------------------------------------


def test_runs_list_shows_reward_duration_error_text_and_tags(
    page: Page, seeded: Seeded, screenshot: Screenshot
) -> None:
    open_runs(page, seeded)

    expected = {seeded.eval_id: "COMPLETED", seeded.train_id: "COMPLETED", seeded.failed_id: "FAILED"}
    for run_id, status in expected.items():
        expect(run_row(page, run_id).get_by_test_id("run-status")).to_have_text(status)
    colours = {
        run_row(page, run_id).get_by_test_id("run-status").evaluate("e => getComputedStyle(e).backgroundColor")
        for run_id in (seeded.eval_id, seeded.failed_id)
    }
    assert len(colours) == 2
    eval_row = run_row(page, seeded.eval_id)
    expect(eval_row.get_by_test_id("run-name")).to_have_text(seeded.eval_name)
    expect(eval_row.get_by_test_id("run-reward")).to_have_text(card_text(seeded.eval_summary["avg_reward"]))
    expect(eval_row.get_by_test_id("run-samples")).to_have_text("3")
    expect(eval_row.get_by_test_id("run-episodes")).to_have_text("3")
    expect(eval_row.get_by_test_id("run-tags")).to_have_text("viewergsm8k")
    expect(eval_row.get_by_test_id("run-duration")).to_have_text(re.compile(r"^\d+(\.\d+)? s$|^\d+m \d\ds$"))
    expect(eval_row.get_by_test_id("run-error-text")).to_have_count(0)

    # A training run has no summary document: its reward is the mean over the episodes the platform holds.
    train_row = run_row(page, seeded.train_id)
    train_rewards = [reward_of(summary_trace(e)) for e in seeded.train_episodes]
    expect(train_row.get_by_test_id("run-kind")).to_have_text("train")
    expect(train_row.get_by_test_id("run-reward")).to_have_text(card_text(sum(train_rewards) / len(train_rewards)))
    expect(train_row.get_by_test_id("run-episodes")).to_have_text(str(len(seeded.train_episodes)))

    failed_row = run_row(page, seeded.failed_id)
    expect(failed_row.get_by_test_id("run-error-text")).to_contain_text("crashed: RuntimeError: reward server")
    screenshot(page, "runs-list")


def test_runs_list_filters_by_kind_status_and_text(page: Page, seeded: Seeded) -> None:
    open_runs(page, seeded)
    rows = page.get_by_test_id("run-row")
    everything = rows.count()
    assert everything >= 4

    page.get_by_test_id("runs-kind").select_option("train")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run-id", seeded.train_id)

    page.get_by_test_id("runs-kind").select_option("")
    page.get_by_test_id("runs-status").select_option("FAILED")
    expect(run_row(page, seeded.failed_id)).to_be_visible()
    assert set(rows.evaluate_all("rs => rs.map(r => r.dataset.status)")) == {"FAILED"}

    page.get_by_test_id("runs-status").select_option("")
    page.get_by_test_id("runs-search").fill("reward server unreachable")  # the failed run's error text
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run-id", seeded.failed_id)
    page.get_by_test_id("runs-search").fill("no run is called this")
    expect(page.get_by_test_id("runs-none-match")).to_be_visible()
    page.get_by_test_id("runs-search").fill("")
    expect(rows).to_have_count(everything)


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


def test_every_request_stays_on_the_viewers_own_origin(page: Page, seeded: Seeded) -> None:
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    open_run(page, seeded, seeded.train_id)
    expect(page.get_by_test_id("metric-panel").first).to_be_visible()
    page.get_by_test_id("tab-episodes").click()
    expect(page.get_by_test_id("episode-row").first).to_be_visible()
    assert requested
    assert all(url.startswith(seeded.url) or url.startswith("data:") for url in requested), requested


# -- evaluation overview ---------------------------------------------------------------------


def test_eval_overview_shows_the_runs_numbers_as_cards(page: Page, seeded: Seeded, screenshot: Screenshot) -> None:
    open_run(page, seeded, seeded.eval_id)

    expect(page.get_by_test_id("tab-overview")).to_have_attribute("aria-selected", "true")
    expect(page.get_by_test_id("run-model")).to_have_text("Qwen/Qwen3-8B")
    expect(page.get_by_test_id("run-environments")).to_have_text("gsm8k")  # the hub's name, not its env_… id
    summary = seeded.eval_summary
    expect(card_value(page, "reward")).to_have_text(card_text(summary["avg_reward"]))
    expect(card_value(page, "error-rate")).to_have_text(percent(summary["avg_error"]))
    expect(card_value(page, "episodes")).to_have_text(str(len(seeded.eval_episodes)))
    expect(card_value(page, "samples")).to_have_text(str(len(seeded.eval_samples)))
    expect(card_value(page, "tokens")).to_have_text(f"{tokens_of(seeded.eval_episodes):,}")
    metric_cards = page.get_by_test_id("metric-card")
    expect(metric_cards).to_have_count(len(summary["avg_metrics"]))
    for name, value in summary["avg_metrics"].items():
        expect(card_value(page, f"metric:{name}")).to_have_text(card_text(value))

    bars = page.get_by_test_id("histogram-bar")
    counts = [int(c) for c in bars.evaluate_all("bs => bs.map(b => b.dataset.count)")]
    rewards = [reward_of(summary_trace(e)) for e in seeded.eval_episodes]
    assert sum(counts) == len(rewards)
    assert counts[0] == rewards.count(0.0) and counts[-1] == rewards.count(1.0)

    delivery = page.get_by_test_id("delivery-table")
    sinks = column(delivery, "delivery-row", "sink")
    assert sinks == list(summary["prime_runs"]["delivery"])
    assert column(delivery, "delivery-row", "delivered") == ["3", "3"]
    assert column(delivery, "delivery-row", "failed") == ["0", "0"]
    page.get_by_test_id("summary-json-toggle").click()
    expect(page.get_by_test_id("summary-json")).to_contain_text('"avg_reward": 0.6666666666666666')
    screenshot(page, "eval-overview")


def test_a_failed_runs_overview_shows_what_was_lost(page: Page, seeded: Seeded, screenshot: Screenshot) -> None:
    open_run(page, seeded, seeded.failed_id)

    expect(page.get_by_test_id("run-error")).to_have_text(FAILED_MESSAGE)
    expect(card_value(page, "error-rate")).to_have_text(percent(seeded.failed_summary["avg_error"]))
    traces = page.get_by_test_id("delivery-row").filter(has=page.locator('td[data-col="sink"]', has_text="traces"))
    expect(traces.locator('td[data-col="failed"]')).to_have_text("1")
    expect(traces.locator('td[data-col="possibly_missing"]')).to_have_text("1")
    expect(traces.locator('td[data-col="failed"] .text-error')).to_have_count(1)
    expect(traces).to_have_class(re.compile("row-error"))
    screenshot(page, "failed-overview")


# -- episodes ------------------------------------------------------------------------------------


def test_an_episode_reads_as_a_chat_transcript_with_its_tool_call_and_errors(
    page: Page, seeded: Seeded, screenshot: Screenshot
) -> None:
    open_run(page, seeded, seeded.eval_id, tab="episodes")
    episode = seeded.eval_episodes[1]  # bash tool call, tool result, then a failed model call
    episode_row(page, episode["id"]).click()

    view = page.get_by_test_id("episode-view")
    expect(view).to_be_visible()
    messages = view.get_by_test_id("message")
    assert messages.evaluate_all("ms => ms.map(m => m.dataset.role)") == ["system", "user", "assistant", "tool"]
    nodes = episode["traces"][0]["nodes"]
    expect(messages.nth(1).get_by_test_id("message-text")).to_have_text(nodes[1]["message"]["content"])
    call = view.get_by_test_id("tool-call")
    expect(call.get_by_test_id("tool-call-name")).to_have_text("bash")
    expect(call.get_by_test_id("tool-call-arguments")).to_contain_text(
        '"command": "grep -c \',refunded,\' /data/orders.csv"'
    )
    expect(messages.nth(3).get_by_test_id("message-text")).to_have_text("13")
    expect(messages.nth(2).get_by_test_id("call-meta")).to_contain_text("Qwen/Qwen3-8B · 212 in · 31 out")
    expect(view.get_by_test_id("failed-call")).to_contain_text("ProviderError (503): upstream returned 503")
    expect(view.get_by_test_id("record-errors").first).to_contain_text("no healthy upstream")
    rewards = view.locator('[data-testid="trace-rewards-row"][data-name="correct"]')
    expect(rewards).to_contain_text("not scored")
    expect(view.get_by_test_id("trace-stop")).to_have_text("stop: provider_error")

    screenshot(page, "eval-episode")
    view.get_by_test_id("episode-json-toggle").click()
    expect(view.get_by_test_id("episode-json")).to_contain_text(f'"id": "{episode["id"]}"')


def test_reasoning_is_folded_and_every_seat_of_a_multi_agent_episode_is_shown(page: Page, seeded: Seeded) -> None:
    open_run(page, seeded, seeded.eval_id, tab="episodes")
    first = seeded.eval_episodes[0]
    episode_row(page, first["id"]).click()
    reasoning = page.get_by_test_id("reasoning").first
    reasoning_text = first["traces"][0]["nodes"][2]["message"]["reasoning_content"]
    expect(reasoning.get_by_test_id("reasoning-text")).to_be_hidden()
    reasoning.locator("summary").click()
    expect(reasoning.get_by_test_id("reasoning-text")).to_have_text(reasoning_text)

    judged = seeded.eval_episodes[2]
    episode_row(page, judged["id"]).click()
    view = page.get_by_test_id("episode-view").nth(1)
    traces = view.get_by_test_id("trace-view")
    expect(traces).to_have_count(2)
    assert traces.get_by_test_id("trace-agent").all_inner_texts() == ["solver", "judge"]
    judge = traces.nth(1)
    expect(judge.get_by_test_id("trace-trainable")).to_have_text("not trainable")
    expect(judge.get_by_test_id("tool-call")).to_have_count(2)
    expect(judge.get_by_test_id("call-row")).to_have_count(len(judged["traces"][1]["calls"]))


def test_episodes_filter_by_outcome_and_environment_and_sort_by_reward(page: Page, seeded: Seeded) -> None:
    open_run(page, seeded, seeded.eval_id, tab="episodes")
    table = page.get_by_test_id("episodes-table")
    rows = table.get_by_test_id("episode-row")
    expect(rows).to_have_count(3)

    page.get_by_test_id("filter-outcome").select_option("error")
    expect(rows).to_have_count(1)
    expect(rows.first.locator('td[data-col="env"]')).to_have_text("bash-tasks")
    page.get_by_test_id("filter-outcome").select_option("ok")
    expect(rows).to_have_count(2)
    page.get_by_test_id("filter-outcome").select_option("")
    page.get_by_test_id("filter-environment").select_option("agentic-judge+gsm8k")
    expect(rows).to_have_count(1)
    expect(rows.first.locator('td[data-col="traces"]')).to_have_text("2")
    page.get_by_test_id("filter-environment").select_option("")
    expect(rows).to_have_count(3)

    table.get_by_test_id("sort-reward").click()  # highest first
    expect(rows.first.locator('td[data-col="reward"]')).to_have_text("1")
    expect(rows.last.locator('td[data-col="reward"]')).to_have_text("0")
    table.get_by_test_id("sort-reward").click()  # lowest first
    expect(rows.first.locator('td[data-col="reward"]')).to_have_text("0")
    expect(table.locator("th[aria-sort]")).to_have_attribute("aria-sort", "ascending")


def test_json_records_and_genai_messages_read_as_transcripts(
    page: Page, seeded: Seeded, screenshot: Screenshot
) -> None:
    open_run(page, seeded, seeded.records_id, tab="episodes")
    rows = page.get_by_test_id("episode-row")
    expect(rows).to_have_count(2)

    episode_row(page, CHAT_TRACE["id"]).click()
    chat = page.get_by_test_id("episode-view").first
    roles = chat.get_by_test_id("message").evaluate_all("ms => ms.map(m => m.dataset.role)")
    assert roles == [m["role"] for m in CHAT_TRACE["messages"]]
    expect(chat.get_by_test_id("tool-call-name")).to_have_text("get_weather")
    expect(chat.get_by_test_id("tool-call-arguments")).to_contain_text('"city": "Lisbon"')
    expect(chat.get_by_test_id("message").last).to_contain_text("dry and 21 °C")

    episode_row(page, GENAI_EPISODE["id"]).click()
    genai = page.get_by_test_id("episode-view").nth(1)
    expect(genai.get_by_test_id("record-errors").first).to_contain_text("ToolError: get_forecast timed out")
    expect(genai.get_by_test_id("message").nth(1)).to_contain_text("umbrella in Porto")
    expect(genai.get_by_test_id("reasoning")).to_contain_text("Reasoning")
    expect(genai.get_by_test_id("tool-call-name")).to_have_text("get_forecast")
    expect(genai.get_by_test_id("tool-call-arguments")).to_contain_text('"city": "Porto"')
    usage = genai.get_by_test_id("trace-usage")
    expect(usage.locator('[data-name="input tokens"]')).to_contain_text("52")
    expect(genai.locator(".trace-head")).to_contain_text("gpt-4.1-mini")
    screenshot(page, "json-records")


# -- samples -------------------------------------------------------------------------------------


def test_samples_sort_filter_and_open_to_prompt_and_completion(
    page: Page, seeded: Seeded, screenshot: Screenshot
) -> None:
    open_run(page, seeded, seeded.eval_id, tab="samples")
    table = page.get_by_test_id("samples-table")
    rows = table.get_by_test_id("sample-row")
    expect(rows).to_have_count(len(seeded.eval_samples))
    shown_rewards = dict(
        zip(column(table, "sample-row", "example_id"), column(table, "sample-row", "reward"), strict=True)
    )
    assert shown_rewards == {str(s["example_id"]): shown(s["reward"]) for s in seeded.eval_samples}
    expect(table.get_by_test_id("sample-error")).to_have_text(
        "ProviderError (503): upstream returned 503: no healthy upstream"
    )

    page.get_by_test_id("filter-outcome").select_option("error")
    expect(rows).to_have_count(1)
    expect(rows.first.locator('td[data-col="stop_condition"]')).to_have_text("provider_error")
    page.get_by_test_id("filter-outcome").select_option("")
    page.get_by_test_id("filter-environment").select_option("gsm8k")
    expect(rows).to_have_count(1)
    page.get_by_test_id("filter-environment").select_option("")
    table.get_by_test_id("sort-reward").click()
    table.get_by_test_id("sort-reward").click()
    expect(rows.first.locator('td[data-col="reward"]')).to_have_text("0")

    first = next(s for s in seeded.eval_samples if s["example_id"] == 0)
    row = rows.filter(has=page.locator('td[data-col="example_id"]', has_text=re.compile(r"^0$")))
    row.focus()
    page.keyboard.press("Enter")  # rows open from the keyboard too
    view = page.get_by_test_id("sample-view")
    prompt = view.get_by_test_id("prompt-transcript").get_by_test_id("message")
    assert prompt.evaluate_all("ms => ms.map(m => m.dataset.role)") == ["system", "user"]
    completion = view.get_by_test_id("completion-transcript").get_by_test_id("message")
    expect(completion).to_have_count(1)
    expect(completion.get_by_test_id("message-text")).to_have_text(first["completion"][-1]["content"])
    expect(view.get_by_test_id("open-episode")).to_have_attribute(
        "href", re.compile(f"/episodes/{first['episode_id']}$")
    )
    screenshot(page, "eval-samples")
    view.get_by_test_id("sample-row-json-toggle").click()
    expect(view.get_by_test_id("sample-row-json")).to_contain_text('"sample_id"')

    view.get_by_test_id("open-episode").click()
    expect(page.get_by_role("heading", name=f"Episode {first['episode_id']}")).to_be_visible()
    expect(page.get_by_test_id("episode-view").get_by_test_id("message")).to_have_count(3)
    expect(page.get_by_test_id("back-to-episodes")).to_be_visible()


def test_samples_are_paged_and_sorted_on_the_server(page: Page, seeded: Seeded, api: PlatformAPI) -> None:
    created = api.create_eval("paged-samples", {"rollouts_per_example": 1})
    template = fixture_json("eval/samples.json")["samples"][0]
    rows: list[dict[str, Any]] = []
    for index in range(60):
        row = copy.deepcopy(template)
        row.update(example_id=index, sample_id=f"s{index:03d}", reward=((index * 37) % 60) / 100)
        rows.append(row)
    api.push_samples(created["evaluation_id"], rows)
    open_run(page, seeded, created["evaluation_id"], tab="samples")

    table = page.get_by_test_id("samples-table")
    table_rows = table.get_by_test_id("sample-row")
    expect(table_rows).to_have_count(50)
    expect(page.get_by_test_id("samples-table-range")).to_have_text("1-50 of 60")
    expect(page.get_by_test_id("samples-table-prev")).to_be_disabled()
    page.get_by_test_id("samples-table-next").click()
    expect(page.get_by_test_id("samples-table-range")).to_have_text("51-60 of 60")
    expect(table_rows).to_have_count(10)
    expect(page.get_by_test_id("samples-table-next")).to_be_disabled()

    table.get_by_test_id("sort-reward").click()  # highest first, over all 60 rows: back to page 1
    expect(page.get_by_test_id("samples-table-range")).to_have_text("1-50 of 60")
    ranked = sorted((r["reward"] for r in rows), reverse=True)
    expect(table_rows.first.locator('td[data-col="reward"]')).to_have_text(shown(ranked[0]))
    page.get_by_test_id("samples-table-next").click()
    expect(table_rows).to_have_count(10)
    assert column(table, "sample-row", "reward") == [shown(r) for r in ranked[50:]]


# -- training runs -------------------------------------------------------------------------------


def test_training_overview_has_one_chart_per_metric_key_with_hover_values(
    page: Page, seeded: Seeded, screenshot: Screenshot
) -> None:
    open_run(page, seeded, seeded.train_id)

    expect(page.get_by_test_id("run-detail-max_steps")).to_have_text("30")
    expect(page.get_by_test_id("run-steps")).to_have_text("30 (last 30)")
    expect(page.get_by_test_id("run-sample-rows")).to_have_text(str(len(seeded.train_rows)))
    expect(page.get_by_test_id("run-num-samples")).to_have_count(0)  # no "samples 0" beside the episodes
    rows = {step: metric_row(step) for step in seeded.train_steps}
    keys = sorted({key for row in rows.values() for key in row})
    panels = page.get_by_test_id("metric-panel")
    expect(panels).to_have_count(len(keys))
    assert sorted(panels.evaluate_all("ps => ps.map(p => p.dataset.metric)")) == keys
    for key in keys:
        panel = page.locator(f'[data-testid="metric-panel"][data-metric="{key}"]')
        steps = [step for step, row in rows.items() if key in row]
        assert len(polyline_vertices(panel)) == len(steps)
        expect(card_value(page, f"last:{key}")).to_have_text(card_text(rows[max(steps)][key]))
    loss = page.locator('[data-testid="metric-panel"][data-metric="loss"]')
    vertices = polyline_vertices(loss)
    assert vertices[0][1] < vertices[-1][1]  # loss falls: the line ends lower on screen
    assert [x for x, _ in vertices] == sorted(x for x, _ in vertices)

    loss.get_by_test_id("chart-overlay").hover()
    tooltip = loss.get_by_test_id("chart-tooltip")
    expect(tooltip).to_be_visible()
    hovered = re.fullmatch(r"step (\d+): (\S+)", tooltip.inner_text())
    assert hovered, tooltip.inner_text()
    assert hovered[2] == shown(rows[int(hovered[1])]["loss"], 6)
    reward_panel = page.locator('[data-testid="metric-panel"][data-metric="reward/mean"]')
    reward_panel.locator(".chart-frame").focus()
    page.keyboard.press("End")
    expect(reward_panel.get_by_test_id("chart-tooltip")).to_have_text(f"step 30: {shown(rows[30]['reward/mean'], 6)}")

    episodes = seeded.train_episodes
    rewards = [reward_of(summary_trace(e)) for e in episodes]
    cards = page.get_by_test_id("episode-cards")
    expect(card_value(cards, "reward")).to_have_text(card_text(sum(rewards) / len(rewards)))
    expect(card_value(cards, "episodes")).to_have_text(str(len(episodes)))
    expect(card_value(cards, "tokens")).to_have_text(f"{tokens_of(episodes):,}")
    received = page.get_by_test_id("received-table")
    assert column(received, "received-row", "count")[:2] == ["30", str(len(seeded.train_rows))]
    screenshot(page, "training-overview")
    page.get_by_test_id("metric-rows-toggle").click()
    expect(page.get_by_test_id("metrics-table").get_by_test_id("metrics-row")).to_have_count(len(seeded.train_steps))


def test_steps_rows_show_prompt_and_completion_apart(page: Page, seeded: Seeded, screenshot: Screenshot) -> None:
    open_run(page, seeded, seeded.train_id, tab="steps")

    section = page.locator('[data-testid="step-section"][data-step="10"]')
    objects = section.get_by_test_id("step-object")
    expect(objects).to_have_count(1)
    expect(objects.locator('td[data-col="key"]')).to_have_text(seeded.train_object_key)
    table = section.get_by_test_id("steps-table")
    expect(table.get_by_test_id("step-row")).to_have_count(len(seeded.train_rows))
    expected = [
        (str(r["sample_id"]), shown(r["reward"]), shown(r["advantage"]), r["env_name"]) for r in seeded.train_rows
    ]
    shown_rows = zip(
        column(table, "step-row", "sample_id"),
        column(table, "step-row", "reward"),
        column(table, "step-row", "advantage"),
        column(table, "step-row", "env_name"),
        strict=True,
    )
    assert sorted(shown_rows) == sorted(expected)
    first = seeded.train_rows[0]
    messages = fixture_json("train/step-10.parquet.rows.json")[0]["completion"]
    assert first["prompt"] == "" and '"role": "system"' in messages  # the row keeps everything in `completion`
    row = table.get_by_test_id("step-row").first
    expect(row.locator('td[data-col="prompt"]')).to_contain_text("James writes a 3-page letter")
    expect(row.locator('td[data-col="completion"]')).to_contain_text("Each week: 3 pages")
    expect(row.locator('td[data-col="completion"]')).not_to_contain_text("Solve the problem")

    row.click()
    view = section.get_by_test_id("step-row-view")
    prompt_roles = view.get_by_test_id("prompt-transcript").get_by_test_id("message")
    assert prompt_roles.evaluate_all("ms => ms.map(m => m.dataset.role)") == ["system", "user"]
    completion = view.get_by_test_id("completion-transcript").get_by_test_id("message")
    assert completion.evaluate_all("ms => ms.map(m => m.dataset.role)") == ["assistant"]
    screenshot(page, "training-steps")
    view.get_by_test_id("step-row-json-toggle").click()
    expect(view.get_by_test_id("step-row-json")).to_contain_text('"role": "assistant"')  # JSON columns decoded


def test_training_episodes_show_their_step(page: Page, seeded: Seeded) -> None:
    open_run(page, seeded, seeded.train_id, tab="episodes")
    rows = page.get_by_test_id("episode-row")
    expect(rows).to_have_count(len(seeded.train_episodes))
    steps = sorted(column(page.get_by_test_id("episodes-table"), "episode-row", "step"), key=int)
    assert steps == sorted((str(e["run"]["work"]["step"]) for e in seeded.train_episodes), key=int)


# -- config, requests, links -----------------------------------------------------------------


def test_config_tab_shows_the_launched_file_verbatim(page: Page, seeded: Seeded, screenshot: Screenshot) -> None:
    open_run(page, seeded, seeded.eval_id, tab="config")

    source = page.get_by_test_id("config-source")
    expect(source).to_be_visible()
    assert source.text_content() == EVAL_TOML
    assert source.locator("*").count() == 0
    expect(page.get_by_test_id("config-filename")).to_have_text("eval.toml")
    expect(page.get_by_test_id("config-format")).to_have_text("toml")
    screenshot(page, "eval-config")


def test_config_tab_falls_back_to_the_config_document(page: Page, seeded: Seeded) -> None:
    open_run(page, seeded, seeded.failed_id, tab="config")

    expect(page.get_by_test_id("config-source")).to_have_count(0)
    expect(page.get_by_test_id("config-json")).to_contain_text('"rollouts_per_example": 4')


def test_requests_tab_counts_the_calls_per_route(page: Page, seeded: Seeded) -> None:
    open_run(page, seeded, seeded.eval_id)
    page.get_by_test_id("tab-overview").focus()
    page.keyboard.press("End")  # the tab list follows the arrow keys, Home and End
    expect(page.get_by_test_id("tab-requests")).to_have_attribute("aria-selected", "true")
    requests = page.get_by_test_id("requests-table")
    samples_row = requests.get_by_test_id("request-row").filter(has_text=re.compile(r"POST .*/samples"))
    expect(samples_row).to_have_count(1)
    expect(samples_row.locator('td[data-col="count"]')).to_have_text("1")


def test_the_runs_viewer_url_opens_that_run(page: Page, seeded: Seeded) -> None:
    page.goto(f"{seeded.eval_viewer_url}#key={seeded.api_key}")

    expect(page.get_by_test_id("run-id")).to_have_text(seeded.eval_id)
    expect(page.get_by_test_id("summary-cards")).to_be_visible()
    assert "key=" not in page.url


# -- live runs -----------------------------------------------------------------------------------


def test_a_running_evaluation_updates_its_counts_and_stops_polling_once_done(
    page: Page, seeded: Seeded, api: PlatformAPI
) -> None:
    eval_id = api.create_eval("live-eval", {"rollouts_per_example": 1})["evaluation_id"]
    open_run(page, seeded, eval_id)
    expect(page.get_by_test_id("live-indicator")).to_be_visible()
    expect(page.get_by_test_id("run-num-episodes")).to_have_text("0")
    expect(page.get_by_test_id("histogram-empty")).to_be_visible()

    episodes = [
        stamped(varied(fixture_json(f"eval/episode-{n}.stamped.json"), "live"), eval_id, "eval") for n in (1, 3)
    ]
    api.upload_episodes(episodes, "eval")
    expect(page.get_by_test_id("run-num-episodes")).to_have_text("2", timeout=4 * REFRESH_S * 1000)
    expect(card_value(page, "episodes")).to_have_text("2")
    expect(page.get_by_test_id("histogram-bar").last).to_have_attribute("data-count", "2")

    polled: list[str] = []
    page.on("request", lambda request: polled.append(request.url))
    api.call("POST", f"/evaluations/{eval_id}/finalize", {"metrics": {"avg_reward": 1.0}})
    expect(page.get_by_test_id("run-status")).to_have_text("COMPLETED", timeout=4 * REFRESH_S * 1000)
    expect(page.get_by_test_id("live-indicator")).to_have_count(0)
    expect(card_value(page, "reward")).to_have_text("1")
    seen = len(polled)
    page.wait_for_timeout((REFRESH_S + 1) * 1000)
    assert polled[seen:] == [], "the page kept polling a terminal run"


def test_a_running_training_run_grows_its_charts(page: Page, seeded: Seeded, api: PlatformAPI) -> None:
    body = {"base_model": "Qwen/Qwen3-4B", "environments": [{"id": "gsm8k"}], "team_id": "team_abc", "name": "live"}
    run_id = api.call("POST", "/rft/external-runs", body)["run"]["id"]
    for step in (1, 2, 3):
        api.log_metrics(run_id, step)
    open_run(page, seeded, run_id)
    loss = page.locator('[data-testid="metric-panel"][data-metric="loss"]')
    expect(loss.get_by_test_id("metrics-point")).to_have_count(3)

    for step in (4, 5, 6):
        api.log_metrics(run_id, step)
    expect(loss.get_by_test_id("metrics-point")).to_have_count(6, timeout=4 * REFRESH_S * 1000)
    expect(page.get_by_test_id("run-steps")).to_have_text("6 (last 6)")
    expect(page.get_by_test_id("last-step")).to_contain_text("Last step: 6")
    api.call("POST", "/rft/finalize", {"run_id": run_id, "exit_code": 0})
    expect(page.get_by_test_id("run-status")).to_have_text("COMPLETED", timeout=4 * REFRESH_S * 1000)
    expect(page.get_by_test_id("live-indicator")).to_have_count(0)


def test_open_pages_follow_a_run_until_it_closes(page: Page, seeded: Seeded, api: PlatformAPI) -> None:
    listed = api.create_eval("closes-while-listed", {"rollouts_per_example": 1})["evaluation_id"]
    viewed = api.create_eval("fails-while-viewed", {"rollouts_per_example": 1})["evaluation_id"]
    open_runs(page, seeded)
    status = run_row(page, listed).get_by_test_id("run-status")
    expect(status).to_have_text("RUNNING")
    expect(page.get_by_test_id("runs-refresh")).to_contain_text("Auto-refreshing")

    api.call("PUT", f"/evaluations/{listed}", {"status": "CANCELLED"})
    expect(status).to_have_text("CANCELLED")

    run_row(page, viewed).get_by_test_id("run-name").click()
    expect(page.get_by_test_id("run-status")).to_have_text("RUNNING")
    api.call("PUT", f"/evaluations/{viewed}", {"status": "FAILED", "error_message": "crashed: out of memory"})
    expect(page.get_by_test_id("run-status")).to_have_text("FAILED")
    expect(page.get_by_test_id("run-error")).to_have_text("crashed: out of memory")
