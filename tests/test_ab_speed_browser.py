"""Issue 58.7 in a real browser (Debian chromium via Playwright): A/B's cloud-only timing is a
choice ("time cloud-only too": auto, on, off); off, the pair is timed without cloud-only and the
page says so, while the cloud-only text diff still shows."""
import pytest

from browser_util import wait_state

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api")


def test_ab_cloud_only_timing_is_a_choice(page, artifacts):
    page.goto(page.base_url)
    page.get_by_role("tab", name="A/B").click()
    page.wait_for_selector("#ab-run")
    choice = page.locator("#ab-time-cloud")
    assert choice.get_by_label("auto", exact=True).is_checked()
    choice.get_by_label("off", exact=True).check()
    page.click("#ab-run")
    assert wait_state(page, "ab-status", timeout=180_000) == "ok", page.inner_text("#ab-status")
    status, diff = page.inner_text("#ab-status"), page.inner_text("#ab-diff")
    assert "cloud-only not timed" in status and "faster than cloud-only" not in status, status
    assert "speed-up over cloud-only" not in diff and "cloud-only time" not in diff, diff
    assert page.locator('#ab-char-diff [data-pair="cloud-A"] .ss-diff').count() == 1
    page.screenshot(path=str(artifacts / "ab-cloud-untimed.png"), full_page=True)
