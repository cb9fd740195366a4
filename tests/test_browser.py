"""The page in a real browser (Debian chromium via Playwright): Live, A/B and Batch tabs.

Screenshots go to test-artifacts/ (live.png, ab.png, batch.png); the Run -> first token and
Run -> finished trace times are written to test-artifacts/timings.json (measured, not asserted
against a target: the machine is shared).
"""
import json
import time

import pytest

from browser_util import app_server, launch_chromium, pick_option, wait_state

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api")

# Timestamps (performance.now) of the first committed token painted and of the final status.
WATCH_JS = """() => { window.__ss = {t0: performance.now(), first: null, done: null};
  const obs = new MutationObserver(() => {
    if (window.__ss.first === null && document.querySelector('.ss-tokens .ss-tok[data-i]'))
      window.__ss.first = performance.now();
    if (window.__ss.done === null && document.querySelector('#live-status [data-state=ok]'))
      window.__ss.done = performance.now();
  });
  obs.observe(document.body, {subtree: true, childList: true, characterData: true}); }"""


@pytest.fixture(scope="module")
def page(artifacts):
    with app_server() as url, playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        pg = browser.new_page(viewport={"width": 1440, "height": 1000})
        pg.base_url = url
        yield pg
        browser.close()


def test_live_tab_streams_coloured_tokens_with_tooltips(page, artifacts):
    # a share link: the knobs and the sample come from the query string
    page.goto(page.base_url + "?entropy_threshold=1.5&k=5&sample=sad_01")
    page.wait_for_selector("#live-run")
    page.wait_for_function("() => document.querySelector('#live-sample input')?.value.startsWith('sad_01')",
                           timeout=15_000)
    # time Run on a settled page, as a person would. Not "networkidle": a page with per-session
    # state (the Inspect tab's gr.State) keeps Gradio's heartbeat stream open for good.
    page.wait_for_load_state("load")
    page.wait_for_timeout(1000)
    page.evaluate(WATCH_JS)
    page.click("#live-run")
    page.wait_for_selector(".ss-tokens .ss-tok[data-i]", timeout=60_000)
    assert wait_state(page, "live-status") == "ok", page.inner_text("#live-status")
    timing = page.evaluate("() => window.__ss")
    (artifacts / "timings.json").write_text(json.dumps({
        "run_to_first_token_s": round((timing["first"] - timing["t0"]) / 1000, 3),
        "run_to_finished_trace_s": round((timing["done"] - timing["t0"]) / 1000, 3)}))

    sources = set(page.eval_on_selector_all(".ss-tokens .ss-tok", "els => els.map(e => e.dataset.source)"))
    assert len(sources & {"accepted", "corrected", "draft", "bonus", "rejected"}) >= 3, sources
    # the share link's knobs reached the widgets and the decoder
    assert page.locator("#live-entropy_threshold input[type=number]").input_value() == "1.5"
    assert not page.locator("#live-entropy_threshold-off input").is_checked()

    tok = page.locator(".ss-tokens .ss-tok[data-i]").nth(2)
    tok.hover()
    tip = tok.locator(".ss-tip")
    tip.wait_for(state="visible", timeout=5_000)
    text = tip.inner_text()
    assert all(k in text for k in ("id", "round", "entropy", "edge p", "cloud p", "cloud rank")), text
    assert page.locator(".ss-card").count() >= 8
    assert page.locator("#live-diagnostics .ss-finding, #live-diagnostics .ss-none").count() >= 1
    page.screenshot(path=str(artifacts / "live.png"), full_page=True)

    # the share link carries the knob values back out
    page.get_by_text("Export & share").click()
    page.get_by_role("button", name="make share link").click()
    page.wait_for_function("() => document.querySelector('#live-share-link textarea, #live-share-link input')"
                           "?.value.includes('entropy_threshold=1.5')", timeout=10_000)
    link = page.locator("#live-share-link textarea, #live-share-link input").first.input_value()
    assert link.startswith(page.base_url) and "k=5" in link and "sample=sad_01" in link


def test_bad_knob_shows_a_message_and_the_page_stays_usable(page):
    page.goto(page.base_url + "?k=banana")   # an invalid share link is refused with a toast
    page.wait_for_selector("#live-run")
    page.wait_for_selector("text=share link ignored", timeout=15_000)
    page.click("#live-run")
    assert wait_state(page, "live-status") == "ok"


def test_ab_tab_runs_fault_against_fixed(page, artifacts):
    page.goto(page.base_url)
    page.get_by_role("tab", name="A/B").click()
    pick_option(page, "ab-fault", "no_resync")      # B = A + fault, and the pair runs
    assert wait_state(page, "ab-status") == "ok", page.inner_text("#ab-status")
    for side in ("ab-side-a", "ab-side-b"):
        assert page.locator(f"#{side} .ss-tokens .ss-tok[data-i]").count() > 0
    diff = page.locator("#ab-diff")
    assert "acceptance_rate" in diff.inner_text()
    assert page.locator("#ab-char-diff .ss-diff").count() == 1
    page.screenshot(path=str(artifacts / "ab.png"), full_page=True)


def test_batch_tab_on_the_bundled_manifest(page, artifacts):
    page.goto(page.base_url)
    page.get_by_role("tab", name="Batch").click()
    limit = page.locator("#batch-limit input[type=number]")
    limit.fill("3")
    limit.press("Enter")
    page.click("#batch-run")
    wait_state(page, "batch-status", timeout=120_000)
    assert "3 runs" in page.inner_text("#batch-status")
    checks = page.locator("#batch-checklist .ss-check")
    assert checks.count() >= 5
    assert page.locator("#batch-checklist [data-passed=pass], #batch-checklist [data-passed=fail]").count() >= 3
    # the table is virtualised: the grid's aria-rowcount counts the header row too
    assert page.locator("#batch-table [role=grid]").get_attribute("aria-rowcount") == "4"
    time.sleep(0.5)  # let the plot finish drawing before the screenshot
    page.screenshot(path=str(artifacts / "batch.png"), full_page=True)


def test_batch_tab_on_the_ray_engine(page, artifacts):
    """The Batch tab's engine switch: the same bundled clips on a local Ray with 2 edge workers
    (started and stopped with the batch), with the tab's progress and the per-clip table."""
    pytest.importorskip("ray", reason="the scale extra is not installed")
    page.goto(page.base_url)
    page.get_by_role("tab", name="Batch").click()
    limit = page.locator("#batch-limit input[type=number]")
    limit.fill("2")
    limit.press("Enter")
    page.locator("#batch-engine").get_by_label("ray").check()
    page.click("#batch-run")
    wait_state(page, "batch-status", timeout=240_000)
    assert "2 runs on Ray (2 workers) · 0 failed" in page.inner_text("#batch-status"), page.inner_text("#batch-status")
    assert page.locator("#batch-table [role=grid]").get_attribute("aria-rowcount") == "3"
    page.screenshot(path=str(artifacts / "batch_ray.png"), full_page=True)
