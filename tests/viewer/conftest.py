"""A real local platform filled through its public HTTP API, and a real headless Chromium to look at it."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

from prime_otel.testing import LocalPlatform, start_local_platform

from ._seed import PlatformAPI, Seeded, seed_all

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "viewer"
WAIT_MS = 15_000


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if CHROMIUM.exists():
        return
    skip = pytest.mark.skip(reason=f"{CHROMIUM} is absent (CI installs Debian's chromium package)")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    handle = start_local_platform(tmp_path_factory.mktemp("viewer-platform"))
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def api(platform: LocalPlatform) -> Iterator[PlatformAPI]:
    client = PlatformAPI(platform.url, platform.api_key)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def seeded(platform: LocalPlatform, api: PlatformAPI) -> Seeded:
    return seed_all(api)


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 860},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser_context: BrowserContext) -> Iterator[Page]:
    """A fresh tab: its own sessionStorage, so no key carries over between tests."""
    tab = browser_context.new_page()
    tab.set_default_timeout(WAIT_MS)
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield tab
    finally:
        tab.close()
    assert errors == [], f"uncaught errors in the page: {errors}"


@pytest.fixture(scope="module")
def screenshot(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Page, str], Path]:
    """Saves a full-page screenshot under the test's temporary folder and copies it to test-artifacts/viewer/."""
    folder = tmp_path_factory.mktemp("viewer-screenshots")

    def take(page: Page, name: str) -> Path:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, ARTIFACTS / path.name)
        return path

    return take
