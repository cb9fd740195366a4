"""A hostile visitor on a shared Space (issue 36 item 6), against the real app: a crafted share
link renders no element, nested / oversized / self-contradicting recordings get their one-line
reason, /batch answers carry no server path, one session cannot fill the queue."""
import json
import uuid
from urllib.parse import quote

import httpx
import pytest
from gradio_client import Client, handle_file

from browser_util import ROOT, app_server

pytestmark = pytest.mark.browser
playwright_api = pytest.importorskip("playwright.sync_api")

EVIL = ('<a id="evil-link" href="https://example.com/phish">session expired</a>'
        '<img id="evil-img" src="https://example.com/x.png"><h1 id="evil-big">BIG</h1>')


@pytest.fixture(scope="module")
def url():
    with app_server() as u:
        yield u


PAGE_VIEWPORT = (1400, 1000)     # the shared `page` fixture (tests/conftest.py)


def test_share_link_value_shows_as_text_not_html(page, url):
    page.goto(f"{url}?k={quote(EVIL)}")
    page.wait_for_function("() => document.body.innerText.includes('share link ignored')", timeout=60_000)
    for sel in ("#evil-link", "#evil-img", "#evil-big", "a[href*='example.com']", "img[src*='example.com']"):
        assert page.locator(sel).count() == 0, sel
    assert '<a id="evil-link"' in page.inner_text("body")     # the value is shown, as text


def _upload(page, url, path, expect: str) -> str:
    page.goto(url)
    page.get_by_role("tab", name="Inspect").click()
    page.wait_for_selector("#inspect-upload")
    page.locator("#inspect-upload input[type=file]").set_input_files(str(path))
    try:
        page.wait_for_function(f"() => document.querySelector('#inspect-status')?.innerText.includes({expect!r})",
                               timeout=60_000)
    except playwright_api.TimeoutError:
        raise AssertionError(page.inner_text("body")[-600:]) from None
    status = page.inner_text("#inspect-status")
    assert "Traceback" not in status and "internal error" not in status and len(status.strip().splitlines()) <= 3
    return status


def test_deeply_nested_recording_is_not_a_recording(page, url, tmp_path):
    bad = tmp_path / "nested.json"
    bad.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    assert "nested too deeply" in _upload(page, url, bad, "not a recording")


def test_oversized_recording_gets_the_limit_in_mb(page, url, tmp_path):
    big = tmp_path / "big.json"
    big.write_text('{"schema": "specscope.recording/1", "pad": "' + "a" * 50_000_000 + '"}', encoding="utf-8")
    status = _upload(page, url, big, "too large")
    assert "MB" in status, status


def _recording(copies: int) -> dict:
    fwd = [{"i": 0, "model": "edge", "ids": [1, 2, 3], "cache_len": 0, "cache": 0},
           {"i": 1, "model": "cloud", "ids": [1, 2, 3, 4], "cache_len": 0, "cache": 1}]
    return {"schema": "specscope.recording/1", "prompt_ids": [1, 2, 3], "out_ids": [4],
            "forwards": [dict(f) for _ in range(copies) for f in fwd]}


def test_repeated_forwards_are_refused_as_malformed(page, url, tmp_path):
    bad = tmp_path / "pasted.json"
    bad.write_text(json.dumps(_recording(348)), encoding="utf-8")
    status = _upload(page, url, bad, "malformed")
    assert "forward 2" in status, status


def test_batch_answer_names_uploads_without_server_paths(url):
    clip = ROOT / "sample_audio" / "sad_01.wav"
    out = Client(url, verbose=False).predict(json.dumps({"max_new_tokens": 6}), "", 0, None,
                                             [handle_file(str(clip))], "demo", api_name="/batch")
    text = json.dumps(out)
    assert [r["audio"] for r in out["rows"]] == ["sad_01.wav"]
    assert "/tmp" not in text and "gradio" not in text.lower(), text[:500]


def test_one_session_cannot_fill_the_queue(url):
    """Raw joins with one session hash, as a script would send them: runs past the cap are
    refused with a message; the accepted ones are cancelled again."""
    cfg = httpx.get(f"{url}config", timeout=30).json()
    fn = next(d["id"] for d in cfg["dependencies"] if d.get("api_name") == "run")
    session, answers = uuid.uuid4().hex[:10], []
    long_run = {"max_new_tokens": 512, "stop_at_first_sentence": False, "faults": ["special_text_stop"]}
    body = {"data": ["sad_01", None, json.dumps(long_run), "demo", False],   # no run ends early
            "fn_index": fn, "session_hash": session, "trigger_id": None}
    for _ in range(7):
        answers.append(httpx.post(f"{url}gradio_api/queue/join", json=body, timeout=30))
    ok = [r.json()["event_id"] for r in answers if r.status_code == 200]
    refused = [r for r in answers if r.status_code != 200]
    for ev in ok:
        httpx.post(f"{url}gradio_api/cancel", json={"event_id": ev, "session_hash": session,
                                                   "fn_index": fn}, timeout=30)
    assert len(ok) == 4 and len(refused) == 3, [r.status_code for r in answers]
    assert "runs queued or running" in refused[0].text, refused[0].text
