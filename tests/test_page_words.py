"""Issue 37's siblings: the page says internal names in words (why a run ended, faults, finding
codes), writes a token id with its text, its cloud URL hint fits its box, and the A/B and Batch
run buttons say "waiting: N runs ahead" as Live's does."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")


def test_ab_status_and_table_say_why_a_run_ended_in_the_live_tabs_words():
    from components.compare import metric_diff_html
    from ui.ab import pair_detail

    ta = {"tokens": [{}] * 3, "ended_by": "sentence"}
    tb = {"tokens": [{}] * 4, "ended_by": "max_tokens"}
    detail = pair_detail(ta, tb, [None, None])
    assert "A: 3 tokens, ended by first sentence end" in detail, detail
    assert "B: 4 tokens, ended by max new tokens" in detail and not SNAKE.search(detail), detail
    html = metric_diff_html({"ended_by": "sentence"}, {"ended_by": "max_tokens"})
    row = re.search(r'<tr data-key="ended_by".*?</tr>', html).group(0)
    assert "first sentence end" in row and "max new tokens" in row and "max_tokens" not in row, row


def test_batch_ended_by_row_in_words():
    from components.batch_view import aggregate_frame

    result = SimpleNamespace(summary={"A": {"ended_by": {"sentence": 4, "max_tokens": 2}}})
    df = aggregate_frame(result).set_index("figure")["config A"]
    assert df["ended by first sentence end (clips)"] == "4" and df["ended by max new tokens (clips)"] == "2"
    assert not any(SNAKE.search(t) for t in df.index), list(df.index)    # a row per reason: none cut


def test_faults_read_as_words_with_their_names_as_values():
    from components.findings import config_badges
    from components.status import status_html
    from specdec_core.decoding.faults import FAULTS
    from ui.knobs import fault_choices

    choices = fault_choices()
    assert [v for _, v in choices] == list(FAULTS)                   # the value the code uses
    for label, name in choices:
        assert not SNAKE.search(label), label                        # 'no resync — ... stale cache'
    labels = dict((v, k) for k, v in choices)
    assert labels["no_resync"].startswith("no resync — ") and "stale cache" in labels["no_resync"]
    html = status_html("run", "x", "", [("fault", "B no_resync"), ("backend", "demo")])
    assert "fault: B no resync" in html and "no_resync" not in html
    badge = config_badges({"faults": ["input_corruption"]})
    assert "fault: input corruption" in badge and 'data-fault="input_corruption"' in badge


def test_finding_cards_show_the_title_with_the_code_in_small_type():
    from components.findings import findings_html, findings_summary

    fs = [{"code": "stale_cache", "severity": "error", "title": "the edge attended to stale tokens"},
          {"code": "context_mismatch", "severity": "error", "title": "x", "explained_by": "stale_cache"}]
    html = findings_html(fs)
    title, code = html.index("the edge attended"), html.index('class="ss-finding-code"')
    assert title < code, html                                    # the title first, then the code
    assert "explained by this finding" in html and "explained by stale_cache" not in html
    assert "(stale cache)" in findings_summary(fs) and "stale_cache" not in findings_summary(fs)


def test_a_recorded_stale_cache_detail_names_its_tokens_with_their_text():
    from ui.inspect import record_example

    res = record_example("no_resync", "angry_01", max_new_tokens=24)
    found = [f for f in res["findings"] if f["code"] in ("stale_cache", "context_mismatch")]
    assert found, [f["code"] for f in res["findings"]]
    for f in found:
        ids = re.findall(r"\bid \d+( «[^»]*»)?", f["detail"] + " " + f["cause"])
        assert ids and all(ids), (f["detail"], f["cause"])           # every id with its text
        assert "None" not in f["detail"], f["detail"]


def test_ab_and_batch_run_buttons_say_how_many_runs_are_ahead():
    """The waiting pre-step (ui/limits.waiting_status, Live's) sits on A/B's and Batch's runs too:
    a queue=False step writing to the tab's status line, before its decode."""
    from ui import batch, limits
    from ui.page import build_demo

    demo = build_demo()
    by_id = {b.elem_id: b._id for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    steps = {(by_id.get("ab-status"), "waiting_status"), (by_id.get("batch-status"), "waiting_or_blank")}
    found = set()
    for fn in demo.fns.values():
        name = getattr(fn.fn, "__name__", "")
        for out in fn.outputs:
            if (out._id, name) in steps and not fn.queue:
                found.add((out._id, name))
    assert found == steps, found
    assert batch.waiting_or_blank(None) == batch.status_html("run", "")    # no queue: blank
    from gradio.helpers import special_args
    for fn in (limits.waiting_status, batch.waiting_or_blank):  # handed the request: own runs not counted
        assert special_args(fn, [], request="the request")[0] == ["the request"], fn


@pytest.mark.browser
def test_cloud_hint_fits_and_fault_pickers_read_as_words(artifacts):
    playwright_api = pytest.importorskip("playwright.sync_api")
    from browser_util import app_server, launch_chromium

    with app_server() as url, playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(url)
        box = page.locator("#live-cloud-url input, #live-cloud-url textarea").first
        box.wait_for()
        fits = box.evaluate("""e => { const s = getComputedStyle(e), c = document.createElement('canvas')
            .getContext('2d'); c.font = `${s.fontSize} ${s.fontFamily}`;
            const room = e.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
            return [c.measureText(e.placeholder).width, room]; }""")
        assert fits[0] <= fits[1], fits                              # the placeholder is not cut
        page.get_by_text("Faults (bug zoo)").first.click()
        faults = page.locator(".ss-faults").first.inner_text()
        assert "no resync — " in faults and not SNAKE.search(faults.replace("*_01", "")), faults
        page.get_by_role("tab", name="A/B").click()
        page.locator("#ab-fault input").first.click()
        options = page.locator("#ab-fault [role=option]").all_inner_texts()
        assert "no resync" in options and not any("_" in o for o in options), options
        browser.close()


def test_live_warnings_and_nested_evidence_keys_read_as_words():
    from components.cards import warnings_html
    from components.findings import evidence_lines

    kinds = re.findall(r'class="ss-warning-kind">([^<]*)<', warnings_html([{"kind": "cache_desync", "message": "m"}]))
    assert kinds == ["cache desync"], kinds
    line = evidence_lines({"tokens": {"drafted": 5, "edge_argmax": 6}}, texts=lambda i: "字")[0]
    assert line == "tokens: drafted 5 «字» · edge argmax 6 «字»", line


def test_ab_tree_table_shows_acceptance_by_depth_once():
    """Issue 50 (6): a tree side's per-position acceptance IS its acceptance by depth; the A/B
    table showed both rows with identical numbers. One row now; both only when they differ."""
    from components.compare import metric_diff_html

    chain = {"per_position_acceptance": [0.8, 0.6], "acceptance_by_depth": None, "nodes_per_call": None}
    tree = {"per_position_acceptance": [0.9, 0.7], "acceptance_by_depth": [0.9, 0.7], "nodes_per_call": 10.0}
    html = metric_diff_html(chain, tree, same_text=True)
    assert html.count('data-key="per_position_acceptance"') == 1
    assert 'data-key="acceptance_by_depth"' not in html
    odd = dict(tree, acceptance_by_depth=[0.95, 0.5])
    assert 'data-key="acceptance_by_depth"' in metric_diff_html(chain, odd, same_text=True)


def test_source_notes_are_not_called_seed_beside_the_seed_knob():
    """Issue 50 (6): "seed" is a knob (the random seed); the bug reports it came from read as
    source notes on the page (fault list, presets, the gates' group)."""
    from ui.knobs import LAYOUT, fault_choices, preset_choices, preset_info

    said = [label for label, _ in fault_choices() + preset_choices()] + [g for g, _, _ in LAYOUT]
    said += [preset_info(name) for _, name in preset_choices()]
    assert not [s for s in said if re.search(r"\bseed ?\d", s)], said
    assert any("source note 000" in s for s in said) and any(s.startswith("source note 001") for s in said)
    assert any("seed" in names for _, _, names in LAYOUT)       # the knob keeps its name
