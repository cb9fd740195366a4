"""Issue 50 (6) in a real browser at 1280 x 900, the size a new user's laptop shows: the Live tab's
Run is in view and its status does not ask for a clip already picked; the share link keeps
"compare with cloud-only"; Inspect offers a user's own file only where the operator allows it;
Batch's acceptance-by-label table shows every column without a scroll."""
import re

import pytest

from browser_util import wait_state

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api")

PAGE_VIEWPORT = (1280, 900)


def test_live_run_is_in_view_and_the_share_link_keeps_cloud_only(page, artifacts):
    page.goto(page.base_url)
    page.wait_for_selector("#live-run")
    run = page.locator("#live-run").bounding_box()
    assert run["y"] + run["height"] <= 900, run                  # no scrolling to find Run
    status = page.inner_text("#live-status")
    assert "Pick a clip" not in status and "Run" in status, status
    assert page.locator("#live-sample input").first.input_value()    # a clip is picked
    page.screenshot(path=str(artifacts / "live-1280x900.png"))
    page.get_by_label("compare with cloud-only").check()
    page.get_by_text("Export & share").click()
    page.get_by_role("button", name="make share link").click()
    box = page.locator("#live-share-link textarea, #live-share-link input").first
    page.wait_for_function("(el) => el.value.startsWith('http')", arg=box.element_handle())
    link = box.input_value()
    assert "cloud_only=1" in link and "sample=" in link, link
    page.goto(link)
    page.wait_for_function("() => document.querySelector('#live-status')?.innerText.includes('share link')")
    assert "compare with cloud-only on" in page.inner_text("#live-status")
    assert page.get_by_label("compare with cloud-only").is_checked()


def test_inspect_offers_your_own_file_only_as_an_operator_setting(page):
    page.goto(page.base_url)
    page.get_by_role("tab", name="Inspect").click()
    page.wait_for_selector("#inspect-record")
    assert page.locator("#inspect-own-file").count() == 0          # off by default
    note = page.inner_text("#inspect-own-note")
    assert "SPECSCOPE_RECORD_OWN_CODE=1" in note and "never on a Space" in note and "record FILE.py" in note


def test_batch_by_label_table_shows_every_column_at_1280(page, artifacts):
    page.goto(page.base_url)
    page.get_by_role("tab", name="Batch").click()
    page.wait_for_selector("#batch-run")
    limit = page.locator("#batch-limit input[type=number]")
    limit.fill("2")
    limit.press("Enter")
    page.get_by_label("also run config B (A/B batch)").check()
    page.locator("#batch-config-b .cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.type('{"draft_tree": "dynamic", "max_new_tokens": 24}')
    page.click("#batch-run")
    wait_state(page, "batch-status", timeout=240_000)
    assert re.search(r"\b4 runs\b", page.inner_text("#batch-status")), page.inner_text("#batch-status")
    widths = page.eval_on_selector("#batch-by-label .ss-by-label-box", "b => [b.scrollWidth, b.clientWidth]")
    assert widths[0] <= widths[1] + 1, widths                       # nothing behind a scroll
    page.locator("#batch-by-label").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "batch-by-label-1280x900.png"))
