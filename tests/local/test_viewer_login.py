"""The viewer signs a browser in with a one-time link instead of a printed key, and the dashboard links the SDK
prints open the viewer's run page on the local platform."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest

from prime_otel.testing import LocalPlatform

from ._helpers import TIMEOUT, create_eval, create_train

COOKIE = "prime_otel_viewer"


def _browser(platform: LocalPlatform) -> httpx.Client:
    """A client that keeps cookies, as a browser does, and presents no key."""
    return httpx.Client(base_url=platform.url, timeout=TIMEOUT)


def _api(platform: LocalPlatform) -> httpx.Client:
    return httpx.Client(base_url=platform.url, headers={"Authorization": f"Bearer {platform.api_key}"}, timeout=TIMEOUT)


def test_a_sign_in_link_gives_that_browser_the_key_and_nobody_else(local_platform_session: LocalPlatform) -> None:
    platform = local_platform_session
    link = platform.viewer_login_url()
    assert platform.api_key not in link
    with _browser(platform) as signed_in, _browser(platform) as other:
        assert other.get("/_viewer/session").status_code == 401
        landed = signed_in.get(link, follow_redirects=True)
        assert landed.status_code == 200 and landed.url.path == "/"
        cookie = landed.history[0].headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and platform.api_key not in cookie
        session = signed_in.get("/_viewer/session")
        assert session.json() == {"api_key": platform.api_key}
        assert session.headers["cache-control"] == "no-store"
        assert other.get("/_viewer/session").status_code == 401


def test_a_sign_in_link_works_once(local_platform_session: LocalPlatform) -> None:
    platform = local_platform_session
    link = platform.viewer_login_url()
    with _browser(platform) as first, _browser(platform) as second:
        assert first.get(link).headers["location"] == "/"
        again = second.get(link)
        assert again.status_code == 303 and again.headers["location"] == "/?signin=expired"
        assert COOKIE not in second.cookies
        assert second.get("/_viewer/session").status_code == 401


def test_minting_a_sign_in_link_needs_the_key(local_platform_session: LocalPlatform) -> None:
    platform = local_platform_session
    with _browser(platform) as anonymous:
        assert anonymous.post("/_viewer/logins").status_code == 401
        assert anonymous.get("/_viewer/login", params={"token": "guessed"}).headers["location"] == "/?signin=expired"


@pytest.mark.parametrize("target", ["/runs/eval-x", "//evil.example/", "https://evil.example/", "runs"])
def test_the_link_only_leads_to_a_page_of_this_origin(local_platform_session: LocalPlatform, target: str) -> None:
    path = local_platform_session.inspect.viewer_login_path()
    with _browser(local_platform_session) as browser:
        location = browser.get(f"{path}&next={quote(target, safe='')}").headers["location"]
    assert location == (target if target == "/runs/eval-x" else "/")


def test_a_signed_in_browser_stays_signed_in_after_a_restart_and_can_sign_out(local_platform: LocalPlatform) -> None:
    with _browser(local_platform) as browser:
        browser.get(local_platform.viewer_login_url())
        local_platform.restart()
        assert browser.get("/_viewer/session").json() == {"api_key": local_platform.api_key}
        assert browser.post("/_viewer/logout").status_code == 204
        assert browser.get("/_viewer/session").status_code == 401


def test_the_dashboard_links_the_sdk_prints_open_the_run_page(local_platform_session: LocalPlatform) -> None:
    platform = local_platform_session
    with _api(platform) as api, _browser(platform) as browser:
        evaluation_id, run_id = create_eval(api), create_train(api)
        index = browser.get("/").text
        for link, run in (
            (f"/dashboard/training/{run_id}", run_id),
            (f"/dashboard/evaluations/{evaluation_id}", evaluation_id),
        ):
            redirect = browser.get(link)
            assert redirect.status_code == 307 and redirect.headers["location"] == f"/runs/{run}"
            page = browser.get(link, follow_redirects=True)
            assert page.status_code == 200 and page.text == index
