"""The Live tab's cloud server URL box in a real browser: a server that is not there gives a
one-line message, and the page keeps serving (the next run, with the box cleared, works)."""
import pytest

from browser_util import app_server, free_port, launch_chromium, wait_state

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api")


def test_a_dead_cloud_url_is_a_message_and_the_app_keeps_serving(artifacts):
    dead = f"http://127.0.0.1:{free_port()}"
    with app_server() as url, playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.goto(url)
        page.wait_for_selector("#live-run")
        box = page.locator("#live-cloud-url textarea, #live-cloud-url input").first
        box.fill(dead)
        page.click("#live-run")
        assert wait_state(page, "live-status") == "err"
        status = page.inner_text("#live-status")
        assert "not reachable" in status and dead in status, status
        page.screenshot(path=str(artifacts / "live-cloud-url.png"), full_page=True)
        box.fill("")
        page.click("#live-run")
        # the error box stays until the new run replaces it: wait for that before reading
        page.wait_for_selector("#live-status [data-state=err]", state="detached", timeout=60_000)
        assert wait_state(page, "live-status") in ("ok", "warn"), page.inner_text("#live-status")
        browser.close()
