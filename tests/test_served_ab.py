"""The Live tab's served engine A/B (issue 49, docs/audit.md "On the page"): a served engine
against our decoder, or against a second served engine, through the real app (gradio_client on
`served_audit`, chromium for the page). Real vLLM servers (tests/test_audit.py's: the demo
pair's draft-model server whose drafter's window is cut to 72, and an n-gram server), a real
decoder behind HTTP without speculative metrics, and a listed server that is down."""
from __future__ import annotations

import re

import pytest

from browser_util import app_process, launch_chromium, wait_state
from cloud_server import free_port
from test_audit import demo, draft, drafter, ngram, servers  # noqa: F401  (module fixtures, shared)

pytestmark = [pytest.mark.cloud, pytest.mark.timeout(2400)]

OURS, SECOND = "our decoder (the Live tab's knobs)", "a second served engine"


@pytest.fixture(scope="module")
def stub(demo):  # noqa: F811
    """The demo cloud behind HTTP with no `metrics` (an engine without speculative decoding)."""
    from openai_stub import OpenAIStub

    with OpenAIStub(demo.cloud, demo.tokenizer) as s:
        yield s


@pytest.fixture(scope="module")
def app(draft, ngram, stub):  # noqa: F811
    """The app with the operator's list: both servers, the stub, and one that is down."""
    dead = f"http://127.0.0.1:{free_port()}"
    urls = [draft.url, ngram.url, stub.url, dead]
    with app_process({"SPECSCOPE_CLOUD_URLS": ",".join(urls)}, log_name="app-served-ab.log") as (url, _):
        yield {"url": url, "dead": dead}


@pytest.fixture(scope="module")
def client(app):
    from gradio_client import Client

    return Client(app["url"], verbose=False, httpx_kwargs={"timeout": 300})   # a busy machine: >5 s


def audit(client, url, versus="nothing", url_b="none", replay="none", replay_b="none", **knobs) -> dict:
    """One `served_audit` call at the page's defaults: its outputs as text, by name."""
    from specdec_core.decoding.config import KNOBS

    dep = next(d for d in client.config["dependencies"] if d.get("api_name") == "served_audit")
    comps = {c["id"]: c["props"] for c in client.config["components"]}
    by_id = {"live-sample": "angry_01", "live-served-url": url, "live-served-replay": replay,
             "live-served-versus": versus, "live-served-url-b": url_b, "live-served-replay-b": replay_b}
    by_label = {KNOBS[k].label: v for k, v in knobs.items()}
    args = []
    for cid in dep["inputs"]:
        p = comps[cid]
        if p.get("label", "").startswith("or upload"):
            args.append(None)
        else:
            args.append(by_id.get(p.get("elem_id"), by_label.get(p.get("label"), p.get("value"))))
    out = client.predict(*args, api_name="/served_audit")
    html = [o for i, o in enumerate(out) if i != 2]          # 2: the acceptance plot
    return dict(zip(("status", "tokens", "findings", "b", "verdict"), html))


def text(html) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html or "")).replace("&#x27;", "'")


def test_a_served_engine_against_our_decoder_gives_the_same_text(client, draft):  # noqa: F811
    """Both greedy and lossless on the demo pair: both sides shown, the texts identical; the
    engine is asked for as many tokens as our decoder gave (it has no sentence stop)."""
    got = audit(client, draft.url, OURS)
    assert "Audited angry_01" in got["status"] and "same as the reference" in text(got["status"])
    b = text(got["b"])
    assert "B: our decoder" in b and "cloud calls" in b and "mean acceptance length" in b
    assert "ss-tokens" in got["tokens"] and "ss-tokens" in got["b"]
    n_a = int(re.search(r"(\d+) tokens", text(got["status"])).group(1))
    n_b = int(re.search(r"(\d+) tokens · \d+ cloud calls", b).group(1))
    assert n_a == n_b > 8
    assert 'data-identical="1"' in got["verdict"] and "identical texts" in text(got["verdict"])
    assert f"Same output: A and B give the same {n_a} tokens" in text(got["verdict"])
    # the counters and colours add up (issue 58.2-3): the cut said, the prompt pass's token not a bonus, no
    # rejected-draft count where it is unknown without replay, vLLM's one-token offset said beside ours
    assert "(finish: length)" in text(got["status"]) and "1 from the prompt pass" in text(got["status"])
    assert 'data-source="prefill"' in got["tokens"] and "rejected draft" in text(got["tokens"])
    assert "rejected draft 0" not in text(got["tokens"])
    assert "its steps start one token after it" in text(got["verdict"]) and "our decoder:" in text(got["verdict"])


def test_two_servers_the_defect_is_on_its_own_side(client, draft, ngram):  # noqa: F811
    """A: the n-gram server (replayed, clean); B: the drafter with the window of 72 positions
    (48 tokens after a 54-token prompt): its acceptance collapses at the window and only B
    carries that finding. Both lossless: the same output."""
    got = audit(client, ngram.url, SECOND, draft.url, replay="ngram")
    a_found, b = text(got["findings"]), text(got["b"])
    assert "Audited angry_01" in got["status"] and f"B: {draft.url}" in b
    # one code for loops and engines (issue 57.1: acceptance_cliff is its alias in the evidence)
    assert "acceptance_collapse" in b and "acceptance collapses past context position" in b
    assert "acceptance_collapse" not in a_found and "No findings" in a_found, a_found
    # the audit's own words: what it judged, and what a black box does not show (issue 58.3)
    assert "not visible from outside" in a_found and "caches, positions, context" not in a_found
    assert got["status"].count("A: Audited") == 1
    # both sides' acceptance by draft position, and the definitions the figures use (issue 57.3)
    v = text(got["verdict"])
    assert "acceptance by draft position, A:" in v and "acceptance by draft position, B:" in v
    assert "1 + accepted drafts / steps" in v
    assert "ss-tokens" in got["b"]
    assert "Same output" in text(got["verdict"]) and "identical texts" in text(got["verdict"])


def test_a_second_engine_without_speculative_metrics_is_one_line_for_its_side(client, draft, stub):  # noqa: F811
    got = audit(client, draft.url, SECOND, stub.url)
    b = text(got["b"])
    assert "no speculative metrics from this server: output compared, acceptance not" in b
    assert "same as the reference" in b and "Same output" in text(got["verdict"])
    assert "Audited angry_01" in got["status"]


def test_a_second_engine_that_is_down_or_not_listed_is_one_line_and_a_stays(client, app, draft):  # noqa: F811
    got = audit(client, draft.url, SECOND, app["dead"])
    assert "Audited angry_01" in got["status"] and "ss-tokens" in got["tokens"]
    b = text(got["b"])
    assert "Could not audit B" in b and app["dead"] in b and "not reachable" in b and "Traceback" not in b
    assert got["verdict"] == ""
    got = audit(client, draft.url, SECOND, "http://10.0.0.1:8000")
    assert "Audited angry_01" in got["status"]
    assert "Could not audit B" in got["b"] and "SPECSCOPE_CLOUD_URLS" in text(got["b"])


def test_the_page_shows_both_sides_and_a_down_second_engine_in_one_line(app, draft, artifacts):  # noqa: F811
    """In chromium: pick A from the list, "a second served engine", then the server that is down:
    A's run is shown, B's block is one error line."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.set_default_timeout(180_000)
            page.goto(app["url"])
            page.get_by_text("Served engine: audit a vLLM server").click()
            # the URL box's own help, not the remote cloud's (issue 58.4)
            box = page.inner_text("#live-served-url")
            assert "make cloud-spec" in box and "the cloud runs in this process" not in box, box
            pick(page, "live-served-url", draft.url)
            assert not page.locator("#live-served-b").is_visible()
            page.locator("#live-served-versus label", has_text=SECOND).click()
            pick(page, "live-served-url-b", app["dead"])
            page.click("#live-served-run")
            assert wait_state(page, "live-served-status") == "ok", page.inner_text("#live-served-status")
            assert "A: Audited" in page.inner_text("#live-served-status")      # side A titled (58.3)
            page.wait_for_selector("#live-served-b [data-state=err]")
            assert "Could not audit B" in page.inner_text("#live-served-b")
            assert page.locator("#live-served-tokens .ss-tokens").count() == 1
            page.screenshot(path=str(artifacts / "served-ab-down.png"), full_page=True)
        finally:
            browser.close()


def pick(page, elem_id: str, url: str) -> None:
    """Choose exactly `url` in the gr.Dropdown with this elem_id (another port may contain it)."""
    page.locator(f"#{elem_id} input").first.click()
    page.locator(f'#{elem_id} [role=option][aria-label="{url}"]').click()
