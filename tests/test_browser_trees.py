"""The Live tab shows a round's token tree (issue 34), in a real browser (Playwright, Chromium)."""
import pytest

from browser_util import wait_state

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api")


def test_live_tab_shows_the_tree_of_a_picked_round(page, artifacts):
    page.goto(page.base_url + "?draft_tree=dynamic&sample=sad_01")
    page.wait_for_selector("#live-run")
    page.wait_for_function("() => document.querySelector('#live-sample input')?.value.startsWith('sad_01')",
                           timeout=120_000)
    assert page.locator("#live-draft_tree input").input_value() == "dynamic"
    assert "draft tree" in page.locator("#live-draft_tree").text_content()
    page.click("#live-run")
    assert wait_state(page, "live-status") == "ok", page.inner_text("#live-status")
    page.wait_for_selector("#live-tree svg .ss-tree-node", timeout=120_000)
    assert page.get_attribute("#live-tree .ss-tree", "data-round") == "1"
    page.fill("#live-tree-round input", "3")
    page.press("#live-tree-round input", "Enter")
    page.wait_for_selector("#live-tree .ss-tree[data-round='3']", timeout=120_000)
    titles = page.eval_on_selector_all("#live-tree .ss-tree-node title", "els => els.map(e => e.textContent)")
    assert len(titles) >= 4 and not any("None" in t for t in titles), titles
    assert any("draft p" in t and "cloud p" in t for t in titles)
    page.locator("#live-tree").screenshot(path=str(artifacts / "live-tree.png"))
