"""The Inspect tab in a real browser (Debian chromium via Playwright): record an example decoder
on a clip, see its findings, trace and drill-down; a bad upload gets a one-line message.
Screenshot: test-artifacts/inspect.png."""
import pytest

from browser_util import pick_option, wait_state

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api")


def test_clean_recording_says_nothing_was_found(page, artifacts):
    """Issue 29: before a recording the trace says to press Record; after a clean one the
    Findings box says that nothing was found, and the drill-down counts cloud calls."""
    page.goto(page.base_url)
    page.get_by_role("tab", name="Inspect").click()
    page.wait_for_selector("#inspect-record")
    empty = page.inner_text("#inspect-tokens")
    assert "press Record" in empty and "press Run" not in empty, empty
    page.locator("#inspect-decoder input").first.click()       # issue 37: grouped, titled list
    options = [o.replace("✓", "").strip() for o in page.locator("#inspect-decoder [role=option]").all_inner_texts()]
    assert options[0].startswith("Correct loops · Correct — A correct greedy") and options[0].endswith("(correct.py)")
    for group in ("One bug each · No resync — ", "Trees · ", "Heads · Stale features — "):
        assert any(o.startswith(group) for o in options), group
    page.locator("#inspect-decoder [role=option]").first.click()
    page.click("#inspect-record")
    assert wait_state(page, "inspect-status", timeout=240_000) == "ok", page.inner_text("#inspect-status")
    assert "(the last, <|im_end|>, is the stop token)" in page.inner_text("#inspect-status")
    page.wait_for_selector("#inspect-findings [data-clean='1']", timeout=120_000)
    text = page.inner_text("#inspect-findings")
    assert "nothing was found" in text and "yet" not in text, text
    drill = page.inner_text("#inspect-drill")
    assert "Cloud call 1 of" in drill and "Step" not in drill, drill
    page.screenshot(path=str(artifacts / "inspect-clean.png"), full_page=True)


def test_record_example_decoder_shows_findings_trace_and_rounds(page, artifacts):
    page.goto(page.base_url)
    page.get_by_role("tab", name="Inspect").click()
    page.wait_for_selector("#inspect-record")
    pick_option(page, "inspect-decoder", "no_resync")
    pick_option(page, "inspect-sample", "sad_01")
    page.click("#inspect-record")
    assert wait_state(page, "inspect-status", timeout=240_000) == "err", page.inner_text("#inspect-status")
    cards = page.locator("#inspect-findings .ss-finding[data-severity=error]")
    assert cards.count() >= 1
    text = page.inner_text("#inspect-findings")
    assert "Likely cause:" in text and "Fix:" in text and "evidence:" in text
    evidence = page.locator("#inspect-findings .ss-rf-evl").all_inner_texts()   # issue 37: key: value
    assert any(e.startswith("tokens: fed ") and "«" in e for e in evidence), evidence
    assert not any(x in e for e in evidence for x in ("{'", "['", "=[")), evidence
    status, drill0 = page.inner_text("#inspect-status"), page.inner_text("#inspect-drill")
    for said in ("rounds rebuilt from what was committed", "cloud calls (forwards of the cloud)",
                 "checked nothing that was committed", "unchecked drafts"):
        assert said in status and said in drill0, (said, status)
    assert page.locator("#inspect-tokens .ss-tok[data-i]").count() >= 10
    assert "recorded run" in page.inner_text("#inspect-badges")
    drill = page.inner_text("#inspect-drill")
    assert "cache before" in drill and "edge top-5" in drill
    pick_option(page, "inspect-round", "cloud call 3")
    page.wait_for_selector('#inspect-drill [data-round="3"]', timeout=120_000)
    page.screenshot(path=str(artifacts / "inspect.png"), full_page=True)


def test_bad_upload_gets_one_line(page, artifacts, tmp_path):
    bad = tmp_path / "notes.json"
    bad.write_text("this is not json", encoding="utf-8")
    page.locator("#inspect-upload input[type=file]").set_input_files(str(bad))
    page.wait_for_function("() => document.querySelector('#inspect-status')?.innerText.includes('not a JSON file')",
                           timeout=120_000)
    status = page.inner_text("#inspect-status")
    assert "Traceback" not in status and len(status.strip().splitlines()) <= 3


def test_pooled_view_over_two_uploaded_recordings(page, artifacts, tmp_path):
    """Two recordings (a correct decoder and a buggy one, on different clips) uploaded together:
    one row each with its own findings, the per-position acceptance pooled, the pooled checks.
    Screenshot: test-artifacts/inspect-pooled.png."""
    import json

    from ui.inspect import record_example

    files = []
    for dec, clip in (("correct", "happy_02"), ("no_resync", "sad_01")):
        res = record_example(dec, clip, max_new_tokens=48)
        path = tmp_path / f"{dec}-{clip}.json"
        path.write_text(json.dumps(res["recording"]), encoding="utf-8")
        files.append(str(path))
    page.goto(page.base_url)
    page.get_by_role("tab", name="Inspect").click()
    page.wait_for_selector("#inspect-pool-upload")
    page.locator("#inspect-pool-upload input[type=file]").set_input_files(files)
    page.wait_for_selector('#inspect-pool [data-pooled="2"]', timeout=60_000)
    pool = page.inner_text("#inspect-pool")
    assert "correct-happy_02" in pool and "no_resync-sad_01" in pool
    assert "no error" in pool                                 # the correct one
    assert "stale_cache" in pool or "context_mismatch" in pool  # the buggy one's own cause
    assert "Acceptance by draft position, pooled" in pool
    assert page.locator("#inspect-pool .ss-pool-pos tr").count() >= 3   # header + positions
    assert "pooled 2 recording" in page.inner_text("#inspect-pool-status")
    page.locator("#inspect-pool").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "inspect-pooled.png"), full_page=True)


def test_uploads_failed_and_malformed_recordings(page, artifacts, tmp_path):
    """Issue 37: an uploaded recording whose run ended in an error shows that error and no green
    'No findings'; a malformed one gets the field that is wrong, no exception name."""
    import json
    import re

    from ui.inspect import record_example

    rec = record_example("correct", "angry_01", max_new_tokens=16)["recording"]
    failed, bad = tmp_path / "failed.json", tmp_path / "bad.json"
    failed.write_text(json.dumps(dict(rec, error="decode raised RuntimeError: CUDA out of memory")), encoding="utf-8")
    bad.write_text(json.dumps({k: v for k, v in rec.items() if k != "out_ids"}), encoding="utf-8")
    page.goto(page.base_url)
    page.get_by_role("tab", name="Inspect").click()
    page.wait_for_selector("#inspect-upload")
    page.locator("#inspect-upload input[type=file]").set_input_files(str(failed))
    page.wait_for_selector("#inspect-findings [data-run-error='1']", timeout=60_000)
    assert wait_state(page, "inspect-status") == "err"
    assert page.locator("#inspect-findings [data-clean='1']").count() == 0
    assert "No findings" not in page.inner_text("#inspect-findings")
    assert page.locator("#inspect-tokens .ss-tok[data-i]").count() > 0
    page.locator("#inspect-upload button[aria-label='Clear']").first.click()   # the box holds failed.json
    page.locator("#inspect-upload input[type=file]").set_input_files(str(bad))
    page.wait_for_function("() => document.querySelector('#inspect-status')?.innerText.includes(\"missing 'out_ids'\")",
                           timeout=120_000)
    status = page.inner_text("#inspect-status")
    assert not re.search(r"KeyError|TypeError|AttributeError|Traceback", status), status
    assert "No findings yet" in page.inner_text("#inspect-findings")      # no earlier trace left
    assert page.locator("#inspect-tokens .ss-tok[data-i]").count() == 0


def test_recorded_tree_loop_shows_the_tree_of_a_picked_step(page, artifacts):
    """Issue 34 item 2: record a tree loop; the first tree round is drawn in #inspect-tree, and
    picking a drill-down step shows the tree its cloud call verified (hover: draft and cloud p).
    Screenshot: test-artifacts/inspect-tree.png."""
    page.goto(page.base_url)
    page.get_by_role("tab", name="Inspect").click()
    page.wait_for_selector("#inspect-record")
    pick_option(page, "inspect-decoder", "tree_correct.py")
    pick_option(page, "inspect-sample", "sad_01")
    page.click("#inspect-record")
    assert wait_state(page, "inspect-status", timeout=240_000) == "ok", page.inner_text("#inspect-status")
    page.wait_for_selector("#inspect-tree svg .ss-tree-node", timeout=120_000)
    first = page.get_attribute("#inspect-tree .ss-tree", "data-round")
    pick_option(page, "inspect-round", "cloud call 4:")
    page.wait_for_selector('#inspect-drill [data-round="4"]', timeout=120_000)
    page.wait_for_function(f"() => document.querySelector('#inspect-tree .ss-tree')?.dataset.round !== '{first}'",
                           timeout=120_000)
    titles = page.eval_on_selector_all("#inspect-tree .ss-tree-node title", "els => els.map(e => e.textContent)")
    assert any("accepted; draft p 0." in t and "cloud p 0." in t for t in titles), titles
    assert not any("#" in t.split("(id")[0] for t in titles[1:]), titles     # nodes named by text
    page.locator("#inspect-tree").scroll_into_view_if_needed()
    page.locator("#inspect-tree").screenshot(path=str(artifacts / "inspect-tree.png"))


def test_inspect_shows_the_signature_an_example_and_the_guide(page, artifacts):
    """Issue 43 item 4 at 1280 px: the signature `record` calls, a ten-line loop one click away,
    and docs/recorder.md served from this repository (the link opens, nothing outside it)."""
    page.set_viewport_size({"width": 1280, "height": 1000})
    page.goto(page.base_url)
    page.get_by_role("tab", name="Inspect").click()
    help_box = page.locator("#inspect-record-help")
    help_box.wait_for(timeout=15_000)
    assert "def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128" in help_box.inner_text()
    help_box.get_by_text("a whole loop it records").click()
    assert help_box.locator("pre.ss-example").is_visible()
    link = help_box.locator("a[data-doc='docs/recorder.md']")
    href = link.get_attribute("href")
    assert not href.startswith(("http", "/", "..")), href
    reply = page.request.get(page.base_url + href)
    assert reply.ok and reply.text().startswith("# The flight recorder"), reply.status
    box = help_box.bounding_box()
    assert box["x"] + box["width"] <= 1280


def test_result_scrolls_into_view_and_an_upload_empties_the_pickers(page, artifacts, tmp_path):
    """Issue 58.9 at 1280 x 900: after a Record and after an upload the result (status, findings)
    is scrolled into view, not left below the fold; an upload empties the example pickers (they
    showed the example recorded before); every command the tab shows is typed as it runs."""
    import json
    import re

    from ui.inspect import record_example

    rec = tmp_path / "upload.json"
    rec.write_text(json.dumps(record_example("no_resync", "sad_01", max_new_tokens=24)["recording"]),
                   encoding="utf-8")
    in_view = ("() => { const r = document.getElementById('inspect-status').getBoundingClientRect();"
               " return r.bottom > 0 && r.top < window.innerHeight; }")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(page.base_url)
    page.get_by_role("tab", name="Inspect").click()
    page.wait_for_selector("#inspect-record")
    shown = page.inner_text("body")
    assert "python -m specdec_core" in shown
    assert not re.search(r"(?<!\.venv/bin/)python -m", shown), re.findall(r".{30}python -m.{20}", shown)
    assert not page.evaluate(in_view)          # below the fold before: the test can fail
    pick_option(page, "inspect-decoder", "Correct — A correct greedy")
    page.click("#inspect-record")
    assert wait_state(page, "inspect-status", timeout=240_000) == "ok", page.inner_text("#inspect-status")
    page.wait_for_function(in_view, timeout=30_000)
    assert page.input_value("#inspect-decoder input")
    page.locator("#inspect-upload input[type=file]").set_input_files(str(rec))
    page.wait_for_function("() => document.querySelector('#inspect-status')?.innerText.includes('recorded upload')",
                           timeout=120_000)
    page.wait_for_function(in_view, timeout=30_000)
    page.screenshot(path=str(artifacts / "inspect-upload-in-view.png"))
    assert page.input_value("#inspect-decoder input") == "" and page.input_value("#inspect-sample input") == ""
