"""components/: HTML, figures and tables rendered from the hand-made trace fixture."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components import ALL_CSS
from components.batch_view import checklist_html, results_table
from components.cards import CARDS_CSS, metric_cards, warnings_html
from components.compare import char_diff_html, metric_diff_table
from components.findings import FINDINGS_CSS, findings_html
from components.config_panel import (DESIGN_KNOBS, KNOB_SPECS, checked_for_widgets, config_to_query,
                                     default_config, query_to_config)
from components.palette import SOURCE_COLORS, SOURCE_LABELS, SOURCE_TINTS
from components.plots import (
    accepted_length_figure,
    batch_distributions,
    entropy_figure,
    position_acceptance_figure,
)
from components.token_view import TOKEN_CSS, render_tokens
from specdec_core.errors import ConfigError

FIXTURE = Path(__file__).parent / "fixtures" / "trace_small.json"
SPAN = re.compile(r'<span class="(?P<cls>ss-tok[^"]*)" tabindex="0" (?P<attrs>[^>]*)>')


@pytest.fixture
def trace() -> dict:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def token_spans(html: str) -> list[dict]:
    """Token/rejected spans in document order: class plus data-* attributes."""
    out = []
    for m in SPAN.finditer(html):
        attrs = dict(re.findall(r'data-([a-z]+)="([^"]*)"', m.group("attrs")))
        attrs["class"] = m.group("cls")
        out.append(attrs)
    return out


def tooltip_of(html: str, i: int) -> str:
    start = html.index(f'data-i="{i}"')
    tip = html.index('class="ss-tip"', start)
    return html[tip: html.index('<span class="ss-tok', tip) if '<span class="ss-tok' in html[tip:] else None]


def strip_tags(fragment: str) -> str:
    return re.sub(r"<[^>]+>", " ", fragment)


# --- token view --------------------------------------------------------------------------


def test_fixture_is_consistent(trace):
    tokens = trace["tokens"]
    assert "".join(t["text"] for t in tokens) == trace["text"]
    assert {t["source"] for t in tokens} == {"accepted", "corrected", "draft", "bonus"}
    assert len(trace["rounds"]) == 10 and len(trace["cycles"]) == 1
    for r in trace["rejected"]:
        assert tokens[r["at"]]["source"] == "corrected" and tokens[r["at"]]["round"] == r["round"]


def test_every_token_coloured_by_its_source(trace):
    html = render_tokens(trace)
    spans = [s for s in token_spans(html) if s["source"] != "rejected"]
    assert [int(s["i"]) for s in spans] == list(range(len(trace["tokens"])))
    for span, tok in zip(spans, trace["tokens"]):
        assert span["source"] == tok["source"]
        assert f"ss-src-{tok['source']}" in span["class"]
        assert span["round"] == str(tok["round"])
    for source, colour in SOURCE_COLORS.items():
        rule = re.search(rf"\.ss-src-{source} \{{([^}}]*)\}}", TOKEN_CSS).group(1)
        assert SOURCE_TINTS[source] in rule and colour in rule
    assert len(set(SOURCE_COLORS.values())) == 4


def test_rejected_tokens_sit_just_before_their_correction(trace):
    order = token_spans(render_tokens(trace))
    for rej in trace["rejected"]:
        pos = next(n for n, s in enumerate(order) if s["source"] == "rejected" and s["id"] == str(rej["id"])
                   and s["at"] == str(rej["at"]))
        after = next(s for s in order[pos:] if s["source"] != "rejected")
        before = next(s for s in reversed(order[:pos]) if s["source"] != "rejected")
        assert after["i"] == str(rej["at"]) and after["source"] == "corrected"
        assert before["i"] == str(rej["at"] - 1)
        assert "ss-rej" in order[pos]["class"]
    assert "line-through" in re.search(r"\.ss-rej \.ss-t \{([^}]*)\}", TOKEN_CSS).group(1)
    assert sum(1 for s in order if s["source"] == "rejected") == len(trace["rejected"])


def test_tooltip_shows_the_numbers_behind_a_token(trace):
    html = render_tokens(trace)
    tok = trace["tokens"][12]  # an accepted, drafted token: all fields present
    text = strip_tags(tooltip_of(html, 12))
    for needle in (str(tok["id"]), f"{tok['entropy']:.2f}", f"{tok['draft_prob']:.3f}",
                   f"{tok['target_prob']:.3f}", "cloud rank", "accepted"):
        assert needle in text, needle
    for alt in tok["top"][:5]:
        assert alt["text"] in text and f"{alt['prob']:.2f}" in text
    corrected = strip_tags(tooltip_of(html, 11))
    assert "corrected" in corrected and "快" in corrected  # names the draft it replaced
    assert "the cloud was not called" in strip_tags(tooltip_of(html, 5))
    assert ".ss-tok:hover > .ss-tip" in TOKEN_CSS


def test_token_text_is_escaped_everywhere(trace):
    evil = copy.deepcopy(trace)
    evil["tokens"][3]["text"] = "<script>alert(1)</script>"
    evil["tokens"][3]["top"][1]["text"] = '"><img src=x onerror=alert(2)>'
    evil["tokens"][4]["source"] = 'bonus" onmouseover="x'
    evil["rejected"][0]["text"] = "</span><b>"
    html = render_tokens(evil)
    assert "<script" not in html and "<img" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'onmouseover="x' not in html
    assert "&lt;/span&gt;&lt;b&gt;" in html
    fig = entropy_figure(evil, None)
    hovers = [c[0] for t in fig.data if t.customdata is not None for c in t.customdata]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in hovers and not any("<script" in h for h in hovers)


def test_legend_names_every_mark_with_counts(trace):
    html = render_tokens(trace)
    legend = html[html.index('class="ss-legend"'): html.index('class="ss-tokens"')]
    counts = pd.Series([t["source"] for t in trace["tokens"]]).value_counts()
    for source, label in SOURCE_LABELS.items():
        assert re.search(rf"{re.escape(label)} <span class=\"ss-legend-count\">{counts[source]}</span>", legend)
    assert "rejected draft" in legend and "cycle" in legend and "rounds" in legend


def test_rounds_and_cycles_are_marked(trace):
    html = render_tokens(trace)
    rounds = re.findall(r'<span class="ss-round (ss-round-\w+)" data-round="(\d+)">', html)
    assert [int(r) for _, r in rounds] == list(range(10))
    assert [c for c, _ in rounds][:3] == ["ss-round-even", "ss-round-odd", "ss-round-even"]
    cyc = {int(s["i"]) for s in token_spans(html) if "ss-cycle" in s["class"] and "i" in s}
    assert cyc == set(range(13, 24))
    plain = render_tokens(trace, highlight_cycles=False)
    assert not any("ss-cycle" in s["class"] for s in token_spans(plain))


def test_cycle_warning_alone_highlights_while_streaming(trace):
    live = {"tokens": [dict(t, cycle=False) for t in trace["tokens"][:20]],
            "warnings": [{"kind": "cycle", "message": "cycle", "start": 13, "end": 20}]}
    cyc = {int(s["i"]) for s in token_spans(render_tokens(live)) if "ss-cycle" in s["class"] and "i" in s}
    assert cyc == set(range(13, 20))


def test_partial_and_empty_traces_render(trace):
    empty = render_tokens({})
    assert "No tokens yet" in empty and "ss-legend" in empty
    assert "No tokens yet" in render_tokens(None)
    partial = {"tokens": trace["tokens"][:10], "rejected": [dict(trace["rejected"][0], at=12)]}
    html = render_tokens(partial, live=True)
    order = token_spans(html)
    assert len(order) == 11 and order[-1]["source"] == "rejected"  # correction not committed yet
    assert "ss-caret" in html and "ss-caret" not in render_tokens(trace)


# --- plots -------------------------------------------------------------------------------


def test_entropy_figure_threshold_line_and_markers(trace):
    fig = entropy_figure(trace, 1.2)
    by = {t.name: t for t in fig.data}
    sources = [s for s in ("accepted", "corrected", "bonus", "draft")
               if any(t["source"] == s and t.get("entropy") is not None for t in trace["tokens"])]
    # the line, one marker trace per source present (each its own colour, so the legend names the
    # colours the points have, draft-only included), then the cloud calls and corrections
    assert [t.name for t in fig.data] == ["entropy"] + [SOURCE_LABELS[s] for s in sources] + ["cloud call", "correction"]
    assert "draft" in sources
    for s in sources:
        assert by[SOURCE_LABELS[s]].marker.color == SOURCE_COLORS[s]
        assert sorted(by[SOURCE_LABELS[s]].x) == [t["i"] for t in trace["tokens"]
                                                  if t["source"] == s and t.get("entropy") is not None]
    shapes = fig.layout.shapes
    assert len(shapes) == 1 and shapes[0].y0 == pytest.approx(1.2) == shapes[0].y1
    # the threshold's label sits above the plot area, never over the markers
    (label,) = [a for a in fig.layout.annotations if "threshold" in a.text]
    assert label.yref == "paper" and label.y >= 1.0 and label.yanchor == "bottom"
    calls = [r["start"] for r in trace["rounds"] if r["verified"]]
    assert list(by["cloud call"].x) == calls
    corrected = [t["i"] for t in trace["tokens"] if t["source"] == "corrected"]
    assert list(by["correction"].x) == corrected
    # correction markers sit at the entropy of the draft the cloud rejected there
    assert by["correction"].y[0] == pytest.approx(trace["rejected"][0]["entropy"])
    ys = list(fig.data[0].y)
    assert ys[4] is None and ys[0] == pytest.approx(trace["tokens"][0]["entropy"])
    assert fig.layout.template.layout.paper_bgcolor is not None and fig.layout.height <= 300


def test_entropy_figure_threshold_off_and_from_config(trace):
    off = entropy_figure(trace, None)
    assert len(off.layout.shapes) == 0
    assert any("off" in a.text for a in off.layout.annotations)
    assert len(entropy_figure(trace, "off").layout.shapes) == 0
    from_cfg = entropy_figure(trace)  # fixture config: entropy_threshold 1.2
    assert from_cfg.layout.shapes[0].y0 == pytest.approx(trace["config"]["entropy_threshold"])
    empty = entropy_figure({}, None)
    assert len(empty.data) == 0 and any("no tokens" in a.text for a in empty.layout.annotations)


def test_accepted_length_figure_stacks_committed_tokens(trace):
    fig = accepted_length_figure(trace)
    bars = {t.name: list(t.y) for t in fig.data if t.type == "bar"}
    assert set(bars) == {SOURCE_LABELS[s] for s in ("accepted", "corrected", "bonus", "draft")}
    totals = [sum(col) for col in zip(*bars.values())]
    assert totals == [r["committed"] for r in trace["rounds"]]
    assert bars["accepted"] == [r["accepted"] for r in trace["rounds"]]
    drafted = next(t for t in fig.data if t.name == "drafted")
    assert list(drafted.y) == [r["drafted"] for r in trace["rounds"]]
    assert fig.layout.barmode == "stack"


def test_position_acceptance_matches_metrics(trace):
    fig = position_acceptance_figure(trace)
    assert list(fig.data[0].x) == [1, 2, 3, 4]
    assert list(fig.data[0].y) == pytest.approx(trace["metrics"]["per_position_acceptance"], abs=1e-3)
    no_rounds = position_acceptance_figure({"metrics": {"per_position_acceptance": [0.9, 0.4]}})
    assert list(no_rounds.data[0].y) == [0.9, 0.4]
    assert len(position_acceptance_figure({}).data) == 0


def test_batch_distributions_by_config():
    df = pd.DataFrame({
        "config": ["A", "A", "B", "B"], "mean_accepted_length": [3.0, 3.5, 2.0, 2.2],
        "punct_density": [0.1, 0.2, 0.4, 0.5], "hanzi_count": [40, 50, 20, 25], "tokens_per_s": [100, 120, 90, 95],
    })
    fig = batch_distributions(df)
    assert [t.type for t in fig.data] == ["bar"] * 8
    assert {t.name for t in fig.data} == {"config A", "config B"}
    readable = results_table([{"name": "a", "metrics": {"hanzi_count": 40, "punct_density": 0.2}}])
    fig2 = batch_distributions(readable)
    assert len(fig2.data) == 2  # hanzi + punct; the other two panels say "no data"
    assert sum("no data" in a.text for a in fig2.layout.annotations) == 2


# --- cards -------------------------------------------------------------------------------


def test_metric_cards_values_and_status(trace):
    html = metric_cards(trace["metrics"], "detailed")
    text = strip_tags(html)
    for needle in ("84.6%", "4.00", "7", "70% of rounds", "142.0", "15.0%", "34", "band 30–70", "sentence"):
        assert needle in text, needle
    assert html.count('data-status=') == 8
    bad = metric_cards(dict(trace["metrics"], punct_density=0.45, acceptance_rate=0.2, ended_by="cycle"))
    assert bad.count('data-status="bad"') == 3
    assert "No metrics" in metric_cards({})


def test_diagnostics_sorted_with_icons_and_escaped(trace):
    findings = trace["diagnostics"] + [{"severity": "error", "title": "<b>leak</b>", "detail": "d", "fix": "f"}]
    html = findings_html(findings)
    sev = re.findall(r'data-severity="(\w+)"', html)
    assert sev == ["error", "warning", "info", "ok"]
    assert "&lt;b&gt;leak&lt;/b&gt;" in html and "<b>leak" not in html
    assert "✖" in html and "▲" in html and "Fix:" in html
    assert "No findings" in findings_html([])


def test_warnings_html(trace):
    html = warnings_html(trace["warnings"])
    assert html.count("<li") == 2 and 'data-kind="cycle"' in html and "音色中" in html
    # no "No warnings." line: it would stand above an error finding under Diagnostics
    assert "No warnings" not in warnings_html(None) and "<li" not in warnings_html(None)
    assert "2 warnings while decoding" in html
    many = warnings_html([{"kind": "cache_desync", "message": f"round {i}: differ"} for i in range(8)])
    assert "<details><summary>3 more</summary>" in many and many.count('class="ss-warning"') == 8
    assert "&lt;x&gt;" in warnings_html([{"kind": "stop", "message": "<x>"}])


# --- compare -----------------------------------------------------------------------------


def test_metric_diff_table_directions():
    a = {"acceptance_rate": 0.5, "punct_density": 0.30, "hanzi_count": 40, "tokens_per_s": 100.0,
         "corrections": 4, "template_leak": False, "cycles": [], "ended_by": "eos", "wall_s": 1.0,
         "only_a": 3}
    b = {"acceptance_rate": 0.8, "punct_density": 0.20, "hanzi_count": 55, "tokens_per_s": 100.0,
         "corrections": 6, "template_leak": True, "cycles": [{"start": 1, "end": 9}], "ended_by": "cycle",
         "wall_s": 0.5}
    df = metric_diff_table(a, b).set_index("metric")
    assert list(df.columns) == ["A", "B", "delta", "better"]
    expect = {"acceptance_rate": "B", "punct_density": "B", "hanzi_count": "", "tokens_per_s": "=",
              "corrections": "A", "template_leak": "A", "cycles": "A", "ended_by": "", "wall_s": "B",
              "only_a": ""}
    assert df["better"].to_dict() == expect
    assert df.loc["acceptance_rate", "delta"] == pytest.approx(0.3)
    assert df.loc["cycles", "A"] == 0 and df.loc["cycles", "B"] == 1
    assert pd.isna(df.loc["ended_by", "delta"]) and df.loc["ended_by", "B"] == "cycle"
    assert list(df.index[:2]) == ["acceptance_rate", "corrections"]  # headline order, not alphabetical


def test_char_diff_html():
    html = char_diff_html("语气低沉，语速慢", "语气很低沉，语速<快>")
    assert "<ins>很</ins>" in html and "<del>慢</del>" in html and "<ins>&lt;快&gt;</ins>" in html
    assert "语气" in html and "<del>语气" not in html
    assert "identical texts" in char_diff_html("同", "同") and "empty" in char_diff_html("", None)


# --- batch view --------------------------------------------------------------------------


def test_checklist_html():
    items = [
        {"name": "no premature stops", "passed": True, "value": "0 of 20", "target": "0"},
        {"name": "punctuation density", "passed": False, "value": "41%", "target": "10–25%"},
        {"name": "cloud call rate", "passed": None, "value": "70%", "target": "reported"},
    ]
    html = checklist_html(items)
    assert re.findall(r'data-passed="(\w+)"', html) == ["pass", "fail", "reported"]
    assert "1 of 2 checks passed, 1 reported" in html and "41%" in html
    assert "No checklist" in checklist_html([])


def test_results_table_flattens_rows():
    rows = [
        {"audio": "sample_audio/angry_01.wav", "label": "angry", "ok": True, "text": "语气激动。",
         "metrics": {"hanzi_count": 4, "acceptance_rate": 0.81234, "mean_accepted_length": 3.2,
                     "punct_density": 0.2, "tokens_per_s": 150.0},
         "scores": {"chrf": 41.5, "emotion_hit": True}, "config": {"k": 4}},
        {"name": "bad.wav", "ok": False, "error": "bad.wav: not an audio file"},
    ]
    df = results_table(rows)
    # short columns first, the long text last: chrF, emotion hit and error fit without scrolling
    assert list(df.columns) == ["name", "label", "ok", "emotion hit", "chrF (0–100)", "prompt type", "汉字",
                                "acceptance", "acc. len", "punct.", "tokens/s", "error", "text"]
    assert df.loc[0, "name"] == "angry_01.wav" and df.loc[0, "acceptance"] == "81.2%"
    assert df.loc[0, "emotion hit"] == "yes" and df.loc[0, "punct."] == "20.0%"
    assert df.loc[0, "chrF (0–100)"] == "41.5" and pd.isna(df.loc[1, "acceptance"])
    assert df.loc[0, "acc. len"] == "3.20" and df.loc[0, "tokens/s"] == "150.0"     # one way per column
    assert df.loc[1, "error"] == "bad.wav: not an audio file"
    ab = results_table([{"name": "x", "config_name": "A"}, {"name": "x", "config_name": "B"}])
    assert list(ab["config"]) == ["A", "B"]


# --- config panel ------------------------------------------------------------------------

DESIGN_DEFAULTS = {  # the knob table of shared/design.md
    "k": 4, "verify": "greedy", "rank_threshold": 5, "entropy_threshold": None, "verify_every": None,
    "temperature": 0, "max_new_tokens": 128, "min_new_tokens": 16, "stop_at_first_sentence": True,
    "prompt_type": "detailed", "comma_gate": 0, "period_gate": 0, "ban_adjacent_repeat": False,
    "no_repeat_ngram": 0, "repetition_penalty": 1.0, "cycle_action": "warn", "seed": 0, "faults": [],
}


def test_knob_specs_match_the_design_table():
    # the schema also carries two knobs outside the design table (cache_check_every, time_limit_s)
    assert DESIGN_KNOBS == list(DESIGN_DEFAULTS)
    assert {k: default_config()[k] for k in DESIGN_KNOBS} == DESIGN_DEFAULTS
    for s in KNOB_SPECS:
        assert s.kind in {"slider", "dropdown", "checkbox", "number", "multiselect"} and s.help
        if s.kind in ("slider", "number"):
            assert s.minimum <= (s.default if s.default is not None else s.minimum) <= s.maximum
        if s.kind in ("dropdown", "multiselect"):
            assert s.choices and (s.kind == "multiselect" or s.default in s.choices)


def test_query_only_carries_changes_and_ignores_unknown_keys():
    assert config_to_query(default_config()) == ""
    q = config_to_query(dict(default_config(), k=6, entropy_threshold=1.5, faults=["no_resync", "mask_1x1"],
                             stop_at_first_sentence=False, backend="demo"))
    assert q == "k=6&entropy_threshold=1.5&stop_at_first_sentence=0&faults=no_resync,mask_1x1"
    back = query_to_config("?" + q + "&backend=omni&zzz=1")
    assert back == dict(default_config(), k=6, entropy_threshold=1.5, faults=["no_resync", "mask_1x1"],
                        stop_at_first_sentence=False)
    assert query_to_config("entropy_threshold=off")["entropy_threshold"] is None


@pytest.mark.parametrize("query", ["k=four", "k=2.5", "verify=beam", "faults=no_resync,bogus",
                                   "ban_adjacent_repeat=maybe", "temperature=nan"])
def test_bad_share_link_values_raise_config_error(query):
    with pytest.raises(ConfigError) as err:
        query_to_config(query)
    assert query.split("=")[0] in str(err.value) and "\n" not in str(err.value)


def _knob_value(spec):
    if spec.kind == "checkbox":
        return st.booleans()
    if spec.kind == "dropdown":
        return st.sampled_from(spec.choices)
    if spec.kind == "multiselect":
        return st.lists(st.sampled_from(spec.options()), unique=True, max_size=3)
    if spec.integer:
        base = st.integers(int(spec.minimum), int(spec.maximum)).filter(lambda v: v not in spec.exclude)
    else:
        base = st.floats(spec.minimum, spec.maximum, allow_nan=False)
    return st.one_of(st.none(), base) if spec.nullable else base


@settings(max_examples=150, deadline=None)
@given(st.fixed_dictionaries({s.name: _knob_value(s) for s in KNOB_SPECS}))
def test_query_round_trip(cfg):
    assert query_to_config(config_to_query(cfg)) == cfg


def test_widget_ranges_are_the_validation_ranges():
    """One truth: every widget bound is a legal value and one step beyond it is refused."""
    from specdec_core.decoding.config import DecodeConfig

    for s in KNOB_SPECS:
        if s.minimum is None:
            continue
        for edge in (s.minimum, s.maximum):
            DecodeConfig.from_dict({s.name: edge})
        for beyond in (s.minimum - (s.step or 1), s.maximum + (s.step or 1)):
            with pytest.raises(ConfigError, match=s.name):
                DecodeConfig.from_dict({s.name: beyond})


@pytest.mark.parametrize("cfg, needle", [
    ({"k": 99}, "k must be in [1, 32], got 99"),
    ({"entropy_threshold": "inf"}, "entropy_threshold=inf (never call the cloud) has no slider"),
    ({"faults": [["x"]]}, "faults must be a list of fault names"),
])
def test_values_no_widget_can_show_get_one_line(cfg, needle):
    with pytest.raises(ConfigError) as err:
        checked_for_widgets(cfg)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_share_link_and_cli_share_one_parser():
    from specdec_core.decoding.config import DecodeConfig

    q = "k=6&entropy_threshold=1.5&verify_every=k&faults=no_resync,mask_1x1&time_limit_s=5"
    cli = DecodeConfig.from_overrides(sets=[kv for kv in q.split("&")])
    assert DecodeConfig.from_dict(query_to_config(q)) == cli
    with pytest.raises(ConfigError, match=r"k must be in \[1, 32\], got 40"):
        query_to_config("k=40")


# --- in a real browser -------------------------------------------------------------------


def standalone_page(*fragments: str, css: str = "", title: str = "SpecScope trace") -> str:
    """A full HTML document of component fragments (the browser test's page)."""
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>'
            f"<style>body{{margin:16px;background:#fff}}{TOKEN_CSS}{css}</style></head><body>"
            + "".join(fragments) + "</body></html>")


@pytest.mark.browser
def test_tooltip_appears_on_hover_in_chromium(trace, artifacts):
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).exists():
        pytest.skip("Debian chromium is not installed")
    from playwright.sync_api import sync_playwright

    page_html = standalone_page(render_tokens(trace), metric_cards(trace["metrics"], "detailed"),
                                findings_html(trace["diagnostics"]), css=CARDS_CSS + ALL_CSS)
    (artifacts / "components_trace.html").write_text(page_html, encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            page.set_content(page_html)
            tip = page.locator('.ss-tok[data-i="11"] > .ss-tip')
            assert not tip.is_visible()
            page.hover('.ss-tok[data-i="11"]')
            tip.wait_for(state="visible", timeout=3000)
            text = tip.inner_text()
            assert "corrected" in text and "0.580" in text and "快" in text
            sources = page.eval_on_selector_all(".ss-tokens .ss-tok", "els => els.map(e => e.dataset.source)")
            assert {"accepted", "corrected", "draft", "bonus", "rejected"} <= set(sources)
            bg = page.eval_on_selector('.ss-tok[data-i="0"]', "e => getComputedStyle(e).backgroundColor")
            assert bg == "rgb(212, 240, 230)"  # SOURCE_TINTS["accepted"]
            page.screenshot(path=str(artifacts / "components_trace.png"), full_page=True)
        finally:
            browser.close()


# --- issue 29: the page as a newcomer reads it -------------------------------------------


def test_ab_table_reads_as_labels_with_units_and_judges_like_for_like():
    from components.compare import metric_diff_html

    a = {"acceptance_rate": 0.8, "cloud_calls": 13, "target_forwards": 13, "bytes_down": 936,
         "mean_accepted_length": 4.076923, "punct_density": 0.132, "wall_s": 0.81234, "hanzi_count": 40}
    b = {"acceptance_rate": None, "cloud_calls": 0, "target_forwards": 0, "bytes_down": 0,
         "mean_accepted_length": None, "punct_density": 0.114, "wall_s": 0.5, "hanzi_count": 38}
    html = metric_diff_html(a, b, same_text=False, prompt_type="detailed",
                            extra=[("speedup", 1.31, 2.2), ("decode_s", 0.81234, 0.5)])
    text = strip_tags(html)
    assert 'data-key="wall_s"' not in html      # a streamed run's wall time includes the page's drawing
    assert not re.search(r"\b[a-z]+_[a-z_]+\b", text), text          # no raw snake_case keys
    assert "4.08 tokens/call" in text and "936 bytes" in text and "0.81 s" in text
    assert "4.0769" not in text and "1.31×" in text
    better = dict(re.findall(r'data-key="(\w+)" data-better="([AB=]?)"', html))
    assert better["cloud_calls"] == "" and better["target_forwards"] == ""   # B never verified
    assert better["punct_density"] == "="                 # both inside 10-25%: no winner
    assert better["hanzi_count"] == "="                   # both inside the detailed band
    assert "texts differ" in html
    # the same text on both sides: fewer cloud calls does win
    same = metric_diff_html(dict(a, cloud_calls=13), dict(b, cloud_calls=9), same_text=True)
    assert re.search(r'data-key="cloud_calls" data-better="B"', same)
    assert "title=" in html and "verify forwards of the cloud model" in html   # hover meaning
    flags = metric_diff_html({"template_leak": False, "ttft_s": None}, {"template_leak": False, "ttft_s": None})
    assert "ttft" not in flags and "time to first token" not in flags            # both sides lack it
    row = flags[flags.index('data-key="template_leak"'):]
    assert "<td>no</td><td>no</td><td></td>" in row                            # a flag has no delta


def test_speedup_and_text_next_to_cloud_only():
    from components.compare import vs_cloud_html
    from specdec_core.evaluation.bench.speedup import speedup_stats

    sp = speedup_stats([1.0, 1.1, 0.9], [2.0, 2.2, 1.9], tokens=40, cloud_calls=10, same_text=False)
    assert sp["speedup"] == pytest.approx(2.0) and (sp["lo"], sp["hi"]) == (pytest.approx(1.9 / 1.1),
                                                                           pytest.approx(2.2 / 0.9))
    html = vs_cloud_html("语气低沉。", "语气很低沉。", sp)
    # a different output: never green, never called a speed-up
    assert "speed of a different output" in html and "ss-vs-fast" not in html and "<del>很</del>" in html
    assert "differs from cloud-only" in html and "median of 3 quiet repeats" in html
    same = vs_cloud_html("同", "同", {**sp, "lossy": False})
    assert "2.00× faster than cloud-only (1.73–2.44×)" in same and "ss-vs-fast" in same
    assert "same text as cloud-only" in vs_cloud_html("同", "同", None)


def test_a_speedup_whose_spread_covers_one_is_no_measurable_difference():
    from components.compare import speedup_cell, vs_cloud_html
    from specdec_core.evaluation.bench.speedup import bound, interleaved_order, speedup_stats

    assert interleaved_order(3, 3) == [0, 1, 2, 2, 1, 0, 0, 1, 2]
    sp = speedup_stats([0.20, 0.25, 0.21], [0.22, 0.19, 0.30], tokens=50, cloud_calls=13, same_text=True)
    assert sp["lo"] < 1 < sp["hi"] and sp["verdict"] == "no measurable difference"
    html = vs_cloud_html("a", "a", sp)
    assert "no measurable difference" in html and "ss-vs-neutral" in html and "faster" not in html
    assert speedup_cell(sp) == "no measurable difference"
    assert "no difference" in metric_cards({"new_tokens": 3}, speedup=sp)
    # above what the acceptance allows (tokens per cloud call, drafting free): said, not shown
    assert bound(40, 10) == 4.0 and bound(40, 0) is None
    high = speedup_stats([0.1, 0.1, 0.1], [0.5, 0.5, 0.5], tokens=40, cloud_calls=20, same_text=True)
    assert high["above_bound"] and high["verdict"] == "faster"
    html = vs_cloud_html("a", "a", high)
    assert "not shown" in html and "above the 2.00×" in html and "ss-vs-fast" not in html
    card = metric_cards({"new_tokens": 3}, speedup=high)
    assert '<div class="ss-card-value">—</div>' in card and "above the 2.00×" in card
    slow = speedup_stats([0.3, 0.31, 0.32], [0.2, 0.21, 0.2], tokens=40, cloud_calls=20, same_text=True)
    assert slow["verdict"] == "slower" and "slower than cloud-only" in vs_cloud_html("a", "a", slow)


def test_cards_of_a_lossy_run_do_not_call_full_acceptance_good(trace):
    lossy = [{"severity": "error", "code": "lossless_violation", "title": "t"}]
    m = dict(trace["metrics"], acceptance_rate=1.0)
    good = metric_cards(m, "detailed")
    assert re.search(r'data-status="good"><div class="ss-card-label">draft acceptance rate', good)
    bad = metric_cards(m, "detailed", findings=lossy)
    card = bad[: bad.index("</div></div>")]
    assert 'data-status="warn"' in card and "lossy" in card and "target &gt; 60%" not in card
    from specdec_core.evaluation.bench.speedup import speedup_stats
    sp = metric_cards(m, "detailed", speedup=speedup_stats([1.0] * 3, [1.4, 1.5, 1.4], 40, 10, True))
    assert "1.40×" in sp and "1.00 s vs 1.40 s (medians)" in sp and "1.40–1.50×" in sp
    lossy_sp = metric_cards(m, "detailed", speedup=speedup_stats([1.0] * 3, [1.4] * 3, 40, 10, False))
    card = lossy_sp[: lossy_sp.index("</div></div>")]
    assert "speed of a different output" in card and 'data-status="good"' not in card


def test_clean_recording_says_nothing_was_found_and_steps_are_named():
    from components.inspect_view import recording_counts, round_html

    assert "No findings yet" in findings_html(None)
    clean = findings_html([])
    assert "nothing was found" in clean and 'data-clean="1"' in clean and "yet" not in clean
    rec = {"forwards": [{"model": "edge", "i": 0}, {"model": "cloud", "i": 1}, {"model": "cloud", "i": 2},
                        {"model": "edge", "i": 3}]}
    counts = recording_counts({"rounds": [{"verified": True}], "tokens": []}, rec)
    html = round_html(rec, 1, counts=counts)
    assert "Cloud call 1 of 2" in html and "1 round, each checked by a cloud call" in html
    assert "2 cloud calls (forwards of the cloud): 1 checked a round, 1 checked nothing" in html
    assert "Tail after cloud call 2" in round_html(rec, 3, counts=counts)


def test_rejected_tooltip_header_names_its_round_not_rejected_twice(trace):
    html = render_tokens(trace)
    rej = html[html.index('data-source="rejected"'):]
    head = rej[rej.index('ss-tip-head">') + len('ss-tip-head">'):rej.index("</span></span>")]
    assert strip_tags(head).count("rejected") == 1 and "draft of round" in head


def test_fault_labels_say_what_the_demo_pair_shows():
    from ui.knobs import fault_choices

    labels = dict((v, k) for k, v in fault_choices())
    assert "fractured" not in labels["no_resync"] and "text often identical" in labels["no_resync"]
    assert "lossy" in labels["lenient_rank"]


def test_batch_figures_have_axis_titles_and_placeholder_has_headers():
    from components.batch_view import aggregate_placeholder, numeric_frame

    df = numeric_frame([{"name": "a", "metrics": {"mean_accepted_length": 3.0, "punct_density": 0.2,
                                                  "hanzi_count": 40, "tokens_per_s": 100.0}}])
    fig = batch_distributions(df)
    titles = [fig.layout[f"xaxis{n}"].title.text for n in ("", "2", "3", "4")]
    assert all(titles) and fig.layout.yaxis.title.text == "clips"
    assert list(aggregate_placeholder().columns) == ["figure", "config A"]
    # every clip lands in a bar (plotly.js's own bins lost most of six clips)
    six = [3.6, 3.6, 2.75, 4.0769, 4.0769, 2.5]
    rows = [{"name": str(i), "metrics": {"mean_accepted_length": v, "punct_density": 0.1 + v / 100,
                                         "hanzi_count": int(10 * v), "tokens_per_s": 100 * v}} for i, v in enumerate(six)]
    fig6 = batch_distributions(numeric_frame(rows))
    assert [int(sum(t.y)) for t in fig6.data] == [6, 6, 6, 6]


def test_label_table_states_denominators_and_its_whole_lies_between_its_halves():
    """Issue 43: overall 65.2% beside halves 76.9% / 83.0% came from two denominators (every
    draft vs judged drafts); the table now names both and shows the per-judged whole."""
    from components.batch_view import label_matrix_html
    from specdec_core.evaluation.batch.watch import label_columns

    def row(drafted, accepted, aj, aa, oj, oa):
        rounds = [{"verified": True, "drafted": drafted, "accepted": accepted}]
        split = {"audio": {"judged": aj, "accepted": aa}, "other": {"judged": oj, "accepted": oa}}
        return {"metrics": {"acceptance_by_dependence": split, "new_tokens": 9, "cloud_calls": 1},
                "trace": {"rounds": rounds}}

    cols = label_columns([row(20, 13, 13, 10, 4, 3), row(10, 6, 5, 4, 2, 2)])
    assert cols["acceptance_rate"] == round(19 / 30, 4) and cols["judged"] == 24
    whole = cols["judged_acceptance_rate"]
    assert whole == round(19 / 24, 4)
    assert cols["audio_acceptance_rate"] <= whole <= cols["other_acceptance_rate"]
    html = label_matrix_html({"sad": {"configs": {"A": cols, "B": cols}}})
    assert "of drafts" in html and "of judged" in html and "Denominators" in html
    assert "77.8% of 18" in html                                    # audio: 14 of 18 judged
    assert 'class="ss-cfg-A"' in html and 'class="ss-cfg-B"' in html


def test_default_batch_clips_span_every_label():
    from specdec_core.evaluation.batch.manifest import read_manifest, spread_labels

    clips = read_manifest(Path(__file__).resolve().parents[1] / "sample_audio" / "manifest.csv")
    labels = list(dict.fromkeys(c.label for c in clips))
    spread = spread_labels(clips)
    assert sorted(c.name for c in spread) == sorted(c.name for c in clips)
    assert {c.label for c in spread[: len(labels)]} == set(labels) and len(labels) >= 6


def test_trees_are_judged_by_mean_acceptance_length_on_cards_checklist_and_ab():
    """Issue 43: a dynamic tree (36% of nodes accepted, 4.64 tokens per call) is not amber on its
    headline, passes the checklist on the chain's target per cloud call, and A/B names no winner
    on counts a tree and a chain count differently."""
    from components.compare import metric_diff_html
    from specdec_core.evaluation.batch.checklist import _acceptance_items

    tree = {"acceptance_rate": 0.36, "mean_accepted_length": 4.64, "nodes_per_call": 10.0,
            "cloud_calls": 12, "new_tokens": 53, "rejected_tokens": 80, "draft_forwards": 48}
    cards = metric_cards(tree, "detailed")
    first = cards[cards.index('<div class="ss-card'):]
    first = first[: first.index("</div></div>")]
    assert "mean acceptance length" in first and 'data-status="good"' in first
    assert "target &gt; 60%" not in cards and 'data-status="warn"' not in cards.split("punctuation")[0]
    assert "nodes accepted / verified" in cards and "nodes verified per call" in cards
    rows = [{"metrics": tree, "trace": {"config": {"k": 4}}}]
    item = _acceptance_items(rows)[0]
    assert item["passed"] is True and "mean acceptance length" in item["name"] and "3.40" in item["target"]
    chain = {"acceptance_rate": 0.62, "mean_accepted_length": 3.5, "nodes_per_call": None, "cloud_calls": 12,
             "new_tokens": 53, "rejected_tokens": 9, "draft_forwards": 60}
    html = metric_diff_html(chain, tree, same_text=True)
    for key in ("acceptance_rate", "rejected_tokens", "draft_forwards"):
        assert re.search(rf'data-key="{key}" data-better=""', html), key
    assert re.search(r'data-key="mean_accepted_length" data-better="B"', html)
    assert "the mean acceptance length compares" in html


def test_no_cloud_call_is_not_checked_and_symptoms_fold_on_one_line():
    live = findings_html([], cloud_calls=0)
    assert "Not checked by the cloud" in live and "No findings" not in live and "✔" not in live
    assert "No findings" in findings_html([], cloud_calls=3)
    rec = findings_html([], None, cloud_calls=0)
    assert "Not checked by the cloud" in rec and "No findings" not in rec
    assert "No findings" in findings_html([], None, cloud_calls=2)
    # the folded symptoms sit in the card's wide column, their summary on one line
    root = {"code": "stale_cache", "severity": "error", "title": "t"}
    sym = {"code": "lossless_violation", "severity": "error", "title": "s", "explained_by": "stale_cache"}
    html = findings_html([sym, root])
    assert html.index('data-code="stale_cache"') < html.index('data-code="lossless_violation"')
    assert "1 symptom(s) explained by this finding" in html
    assert re.search(r"\.ss-finding-explained \{ grid-column: 2;", FINDINGS_CSS)
    assert "white-space: nowrap" in FINDINGS_CSS.split(".ss-finding-explained > summary")[1].split("}")[0]


def test_inspect_shows_the_record_signature_and_a_loop_that_records():
    from components.inspect_view import RECORD_EXAMPLE, record_help_html

    html = record_help_html()
    assert "def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()" in html
    assert 'href="gradio_api/file=docs/recorder.md"' in html and "../" not in html
    body = RECORD_EXAMPLE.split("def decode", 1)[1].splitlines()[1:]
    assert len(body) == 10, body                                # ten lines in the function
    ns: dict = {}
    exec("import torch\n" + RECORD_EXAMPLE, ns)                 # it is real Python
    assert callable(ns["decode"])


def test_batch_ab_histograms_in_two_colours_side_by_side_and_aggregate_keeps_both_columns():
    from components.batch_view import aggregate_html, numeric_frame

    rows = [{"name": n, "config": c, "metrics": {"mean_accepted_length": v, "punct_density": 0.12,
                                                 "hanzi_count": 40, "tokens_per_s": 90.0}}
            for n, c, v in (("a", "A", 3.5), ("b", "A", 3.6), ("a", "B", 4.4), ("b", "B", 4.6))]
    fig = batch_distributions(numeric_frame(rows))
    first = [t for t in fig.data if t.xaxis in (None, "x")]
    assert [t.name for t in first] == ["config A", "config B"]
    assert first[0].marker.color != first[1].marker.color
    # side by side in every shared bin: A's bars end where B's begin
    assert all(xa + wa / 2 <= xb - wb / 2 + 1e-9 for xa, wa, xb, wb in
               zip(first[0].x, first[0].width, first[1].x, first[1].width))
    df = pd.DataFrame({"figure": ["clips", "draft acceptance rate (mean)"], "config A": ["2", "70.3%"],
                       "config B": ["2", "33.1%"]})
    html = aggregate_html(df)
    assert 'data-config="config B"' in html and "33.1%" in html and "table-layout" not in html


def test_a_busy_machine_times_nothing_and_says_so_once():
    """Issue 50 (5): Live read 'spread 0.46–10.57×'; A/B called the faster median 'no measurable
    difference' and the slower '2.62× faster than cloud-only'. Repeats that vary more than 2x give
    one line (timing not possible now, use bench), and A/B verdicts never order against medians."""
    from components.compare import speedup_cell, vs_cloud_html
    from specdec_core.evaluation.bench.speedup import ordered, speedup_stats
    from ui.ab import busy_line, pair_detail, timing_rows

    live = speedup_stats([0.1, 0.3, 1.9], [0.8, 0.9, 1.05], tokens=53, cloud_calls=14, same_text=True)
    assert live["verdict"] == "busy"
    html = vs_cloud_html("a", "a", live)
    assert "timing not possible now" in html and "python -m specdec_core bench" in html
    said = html.split("<b>")[1].split("</b>")[0]
    assert "spread" not in said and "faster" not in said and "ss-vs-neutral" in html
    assert speedup_cell(live) == "not timed (machine busy)"
    card = metric_cards({"new_tokens": 53}, speedup=live)
    assert '<div class="ss-card-value">—</div>' in card and "busy" in card
    # A/B: steady repeats, but A's faster median reads 'no measurable difference' while B's slower
    # one reads 'faster': the verdicts contradict the medians, so no side gets one
    a = speedup_stats([0.30, 0.32, 0.58], [0.55, 0.60, 0.62], 53, 14, True)
    b = speedup_stats([0.33, 0.34, 0.35], [0.55, 0.60, 0.62], 53, 14, True)
    assert a["speedup"] > b["speedup"] and a["verdict"] == "no measurable difference" and b["verdict"] == "faster"
    sps = ordered([a, b])
    assert [sp["verdict"] for sp in sps] == ["busy", "busy"]
    t = {"tokens": [{}] * 53, "ended_by": "sentence"}
    detail = pair_detail(t, t, sps)
    assert detail.count("timing not possible now") == 1 and "faster" not in detail
    assert timing_rows(sps, [a["decode_samples"], b["decode_samples"]]) == ([], {})
    # no cloud-only: fixed 0.95 s vs broken 7.96 s on repeats that vary 5x is not 'within noise'
    decode = [[0.9, 0.95, 4.8], [1.5, 7.96, 8.1]]
    assert "timing not possible now" in busy_line([None, None], decode)
    assert timing_rows([None, None], decode) == ([], {})
    steady = [[0.9, 0.95, 1.0], [7.8, 7.96, 8.1]]
    assert busy_line([None, None], steady) == "" and timing_rows([None, None], steady)[0]


def test_a_fault_latent_at_the_knobs_is_not_a_clean_bill():
    """Issue 50 (5): double_temperature at T = 0 changes nothing, the blind checks find nothing,
    and the page read '✔ No findings'; it now says the fault is latent at these knobs."""
    from specdec_core.api import load_backend, run_clip
    from specdec_core.decoding.config import DecodeConfig
    from specdec_core.decoding.faults import latent

    cfg = DecodeConfig(faults=["double_temperature"])
    res = run_clip(load_backend("demo"), "sample_audio/angry_01.wav", cfg)
    assert res["ok"] and not [f for f in res["trace"]["diagnostics"] if f["severity"] != "info"]
    lines = latent(cfg.to_dict())
    assert lines == ["double temperature is latent at these knobs: dividing the logits twice changes no "
                     "argmax at temperature 0 (greedy)"]
    html = findings_html([], cloud_calls=res["metrics"]["cloud_calls"], latent=lines)
    assert 'data-latent="1"' in html and "double temperature is latent" in html
    assert "✔" not in html and 'data-clean="1"' not in html
    assert latent(dict(cfg.to_dict(), temperature=0.7)) == [] and latent({"faults": []}) == []
    assert "draft tree = chain" in latent({"faults": ["no_compaction"], "draft_tree": "chain"})[0]
