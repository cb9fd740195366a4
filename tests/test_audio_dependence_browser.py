"""The token colouring toggle in a real browser (issue 28): Live and Inspect tabs recolour the
trace by audio dependence / cloud rank with no re-render, and show the colour key.
Screenshot: test-artifacts/inspect-dependence.png."""
import pytest

from browser_util import pick_option, wait_state

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api")

BG = "el => getComputedStyle(el).backgroundColor"


PAGE_VIEWPORT = (1440, 1000)     # the shared `page` fixture (tests/conftest.py)


def test_live_toggle_shows_the_colour_key(page):
    page.goto(page.base_url)
    page.wait_for_selector("#live-colour")
    key = page.locator("#live-colour ~ .ss-tokens-panel .ss-key-dep")
    assert not key.is_visible()
    page.locator("#live-colour").get_by_text("audio dependence").click()
    key.wait_for(state="visible", timeout=120_000)
    page.locator("#live-colour").get_by_text("cloud rank").click()
    page.locator("#live-colour ~ .ss-tokens-panel .ss-key-rank").wait_for(state="visible", timeout=120_000)
    assert not key.is_visible()


def test_inspect_colours_tokens_by_audio_dependence(page, artifacts):
    page.goto(page.base_url)
    page.get_by_role("tab", name="Inspect").click()
    page.wait_for_selector("#inspect-record")
    pick_option(page, "inspect-decoder", "edge_no_audio")
    pick_option(page, "inspect-sample", "angry_01")
    page.click("#inspect-record")
    wait_state(page, "inspect-status", timeout=300_000)
    found = page.inner_text("#inspect-findings")
    assert "prompt differs from the cloud's" in found and "error" not in found.lower(), found
    toks = page.locator("#inspect-tokens .ss-tok[data-i]")
    tok = toks.first
    source_bg = tok.evaluate(BG)
    before = [toks.nth(i).evaluate(BG) for i in range(toks.count())]
    page.locator("#inspect-colour").get_by_text("audio dependence").click()
    page.locator("#inspect-tokens .ss-key-dep").wait_for(state="visible", timeout=120_000)
    after = [toks.nth(i).evaluate(BG) for i in range(toks.count())]
    assert after != before and len(set(after)) >= 3      # a graded tint, not the source colours
    page.screenshot(path=str(artifacts / "inspect-dependence.png"), full_page=True)
    page.locator("#inspect-colour").get_by_text("source").click()
    page.wait_for_function("() => !document.querySelector('#inspect-tokens .ss-key-dep').checkVisibility()")
    assert tok.evaluate(BG) == source_bg
