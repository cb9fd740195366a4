"""Issue 37, "the page still contradicts itself": every number means one thing, the status
reflects the findings, identical A/B configs name no winner, no "None" in a tooltip."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.compare import char_diff_html, judge, metric_diff_html, vs_cloud_html
from components.status import finished_status, status_html
from components.token_view import render_tokens
from specdec_core import DecodeConfig
from specdec_core.api import load_backend, run_clip

CLIP = str(Path(__file__).resolve().parents[1] / "sample_audio" / "sad_01.wav")


@pytest.fixture(scope="module")
def corrupted():
    """The input_corruption fault: its commit appends unchecked copies of the drafts."""
    return run_clip(load_backend("demo"), CLIP, DecodeConfig.from_dict({"faults": ["input_corruption"], "k": 4}))


def test_mean_acceptance_length_never_above_k_plus_1(corrupted):
    m = corrupted["metrics"]
    assert m["cloud_calls"] > 0 and m["draft_only_tokens"] > 0    # the fault did its thing
    # committed tokens per call exceed k + 1 here (the copies), what the cloud vouched for cannot
    rounds = corrupted["trace"]["rounds"]
    assert max(r["committed"] for r in rounds if r["verified"]) > 5
    assert 1 <= m["mean_accepted_length"] <= 4 + 1


def test_no_none_in_any_tooltip(corrupted):
    trace = dict(corrupted["trace"])
    trace["rejected"] = [dict(r, target_rank=None) for r in trace["rejected"]] or [
        {"id": 5, "text": "x", "source": "rejected", "round": 0, "at": 0, "target_rank": None}]
    page = render_tokens(trace)
    tips = re.findall(r'class="ss-tip"[^>]*>(.*?)</span></span>', page, flags=re.S) or [page]
    assert not any(re.search(r"\bNone\b|\bnull\b", t) for t in tips)
    assert "its cloud rank was not recorded" in page


def test_a_draft_after_the_rejected_one_reads_never_scored():
    """Drafts after the first rejection of a round were dropped with it: the cloud never scored
    them, so their tooltip must not say the cloud rejected them."""
    trace = {"tokens": [{"i": 0, "id": 1, "text": "a", "source": "corrected", "round": 1}],
             "rounds": [{"round": 1, "verified": True}],
             "rejected": [{"id": 2, "text": "b", "round": 1, "at": 0, "target_rank": 7},
                          {"id": 3, "text": "c", "round": 1, "at": 0, "target_rank": None}]}
    tips = re.findall(r'<span class="ss-tip-note">(.*?)</span>', render_tokens(trace))
    assert tips[0].startswith("dropped: the cloud rejected it (its rank 7"), tips
    assert "never scored" in tips[1] and "rejected it" not in tips[1], tips


def test_unchecked_drafts_do_not_claim_no_cloud_call(corrupted):
    """input_corruption commits copies in rounds that did call the cloud (cloud calls 100% of
    rounds): their legend and tooltip say "unchecked", not "no cloud call"."""
    m = corrupted["metrics"]
    assert m["cloud_call_rate"] == 1.0 and m["draft_only_tokens"] > 0
    page = render_tokens(corrupted["trace"])
    assert "no cloud call" not in page and "edge-only" not in page
    assert f'unchecked draft <span class="ss-legend-count">{m["draft_only_tokens"]}</span>' in page
    assert "its round called the cloud" in page and "the cloud was not called" not in page


def test_a_run_with_an_error_finding_is_not_green_done():
    err = [{"code": "doubling", "severity": "error"}]
    warn = [{"code": "x", "severity": "warning"}]
    assert finished_status("a.wav", False, err) == ("err", "Done, with errors: a.wav")
    assert finished_status("a.wav", False, [], warn)[0] == "warn"
    assert finished_status("a.wav", False, []) == ("ok", "Done: a.wav")
    assert finished_status("a.wav", True, []) == ("err", "Stopped: a.wav")
    assert 'data-state="warn"' in status_html("warn", "Done, with warnings: a.wav")


def test_identical_configs_name_no_winner_from_timing_noise():
    # the case: B faster in decode time, A faster in wall time, from noise alone
    a = {"wall_s": 0.20, "tokens_per_s": 250.0, "cloud_calls": 12}
    b = {"wall_s": 0.21, "tokens_per_s": 240.0, "cloud_calls": 12}
    html = metric_diff_html(a, b, same_text=True, extra=[("decode_s", 0.18, 0.17)])
    assert 'data-better="A"' not in html and 'data-better="B"' not in html
    assert "within noise" in html
    assert judge("wall_s", 0.2, 0.5, True)[0] == "A"            # a real difference is still named


def test_identical_texts_show_no_only_in_legend():
    html = char_diff_html("说话人语速较快", "说话人语速较快")
    assert "only in" not in html and "identical texts" in html
    assert "only in A" in char_diff_html("说话", "说的")


def test_speedup_line_says_which_time_it_uses():
    from specdec_core.evaluation.bench.speedup import speedup_stats
    html = vs_cloud_html("a", "a", speedup_stats([0.17] * 3, [0.2, 0.21, 0.2], 40, 10, True))
    assert "decoding 0.17 s (median of 3 quiet repeats, no page drawing)" in html
    assert "cloud-only 0.20 s (median of 3, interleaved with them)" in html


def test_a_recording_with_an_error_has_no_green_no_findings_card():
    from components.findings import findings_html
    html = findings_html([], error="the cloud timed out")
    assert 'data-run-error="1"' in html and "No findings" not in html and "✖" in html


def test_every_example_decoder_is_listed_with_a_description():
    from ui.inspect import example_choices, example_names
    choices = example_choices()
    assert [v for _, v in choices] == example_names() and len(choices) >= 20
    for label, name in choices:          # "group · Title — what it does (file.py)" (issue 37)
        assert label.endswith(f"({name}.py)") and " — " in label and len(label) > len(name) + 20, label
        assert "seed" not in label.split(" — ", 1)[1].lower()[:12], label     # no "Bug (seed 000 D)"


@pytest.mark.parametrize("raw", ['{"schema": "specscope.recording/1", "forwards": [1, 2]}',
                                 '{"schema": "specscope.recording/1", "forwards": [{}]}'])
def test_a_malformed_recording_gets_a_reason_not_an_exception_name(raw, tmp_path):
    from ui.inspect import InspectTab
    path = tmp_path / "bad.json"
    path.write_text(raw, encoding="utf-8")
    status = object.__new__(InspectTab).on_upload(str(path))[0]     # no widgets needed
    assert 'data-state="err"' in status
    assert "not a usable recording" in status, status
    assert not re.search(r"KeyError|TypeError|AttributeError|IndexError|ValueError|internal error", status), status


def test_accepted_length_plot_ticks_stay_on_its_rounds(corrupted):
    from components.plots import accepted_length_figure
    fig = accepted_length_figure(corrupted["trace"])
    rounds = [r["round"] for r in corrupted["trace"]["rounds"]]
    lo, hi = fig.layout.xaxis.range
    assert lo == min(rounds) - 0.5 and hi == max(rounds) + 0.5
    assert fig.layout.xaxis.tick0 == min(rounds) and float(fig.layout.xaxis.dtick).is_integer()


def test_inactive_knobs_and_plain_words():
    """Knobs that do nothing in the chosen mode are named with the reason; presets, help and
    ended-by values read as words, not as formulas or snake_case."""
    from components.config_panel import KNOB_SPECS, inactive
    from components.formatting import ended_by_words, plain
    from specdec_core.decoding.config import PRESET_HELP
    from ui.knobs import preset_choices, preset_info

    assert set(inactive({})) == {"tree_branch", "tree_nodes", "rank_threshold", "entropy_unit", "verify_every",
                                 "seed"}
    assert inactive({"draft_tree": "static", "verify": "rank", "entropy_threshold": 2.0, "temperature": 0.7}) == {}
    assert "min_new_tokens" in inactive({"stop_at_first_sentence": False})
    assert "seed" not in inactive({"cycle_action": "resample"})
    assert {"link_rtt_ms", "link_uplink_kbps"} <= set(inactive({}, remote=True))
    from ui.live import link_knobs
    assert [u["interactive"] for u in link_knobs("http://127.0.0.1:8000")] == [False, False]
    assert [u["interactive"] for u in link_knobs("")] == [True, True]
    for spec in KNOB_SPECS:
        text = plain(spec.help) + plain(spec.label)
        assert not re.search(r"min\(1|ln\|V\||\bnull\b|<=|==|\b[a-z]+_[a-z_]+=", text), (spec.name, text)
    for label, name in preset_choices():
        assert "_" not in label, label
        assert "ln|V|" not in preset_info(name)
    assert "max entropy" in preset_info("fluency_first") and "fluency_first" in PRESET_HELP
    assert ended_by_words("max_tokens") == "max new tokens" and ended_by_words(None) == "—"


def test_prosody_reads_as_words():
    from components.status import prompt_info_md
    info = {"prosody": {"pitch": -3.14, "pvar": 0.2, "energy": -28.8, "rate": 3.48, "pause": 0.22},
            "bins": {"pitch": "low", "pvar": "flat", "energy": "low", "rate": "slow", "pause": "many"},
            "prosody_text": "pitch=-3.1st(low) pvar=0.2st(flat)"}
    md = prompt_info_md(info)
    assert "pitch=" not in md and "pitch low (-3.1 semitones" in md and "pauses many (22%" in md


# ---- in a real browser ----------------------------------------------------------------------
def _tips(page) -> list[str]:
    return page.eval_on_selector_all(".ss-tokens .ss-tip", "els => els.map(e => e.textContent)")


@pytest.mark.browser
def test_live_input_corruption_reads_one_way(page):
    """A share link with a fault: the fault shows before Run; the run's counts agree (unchecked
    drafts beside 100% cloud calls, mean acceptance length <= k + 1), no 'None' in a tooltip,
    not a green Done with an error, the plots' round axis stays on its rounds."""
    from browser_util import wait_state
    page.goto(page.base_url + "?faults=input_corruption&k=4&sample=sad_01")
    page.wait_for_selector("#live-status [data-state=idle]")
    page.wait_for_function("() => document.querySelector('#live-status')?.innerText.includes('share link')",
                           timeout=120_000)
    status = page.inner_text("#live-status")
    assert "fault: input corruption" in status and "Opened from a share link on sad_01" in status, status
    page.click("#live-run")
    page.wait_for_selector("#live-status [data-state=run]", timeout=120_000)
    state = wait_state(page, "live-status", timeout=120_000)
    status = page.inner_text("#live-status")
    errors = page.locator("#live-diagnostics [data-severity=error]").count()
    assert not (state == "ok" and errors), status
    if errors:
        assert state == "err" and "✔" not in status, status
    legend = page.inner_text(".ss-legend")
    assert "no cloud call" not in legend and "unchecked draft" in legend, legend
    calls = page.locator(".ss-card", has_text="cloud calls").first.inner_text()
    assert "100% of rounds" in calls, calls
    mal = page.locator(".ss-card", has_text="mean acceptance length").first
    assert 1 <= float(mal.locator(".ss-card-value").inner_text()) <= 5
    tips = _tips(page)
    assert tips and not any(re.search(r"\bNone\b|\bnull\b", t) for t in tips)
    ended = page.locator(".ss-card", has_text="ended by").first.locator(".ss-card-value").inner_text()
    assert "_" not in ended and "_" not in status.split("ended by")[1].split("·")[0], (ended, status)
    page.get_by_text("What the backend read from the clip").click()
    info = page.locator("#live-info")
    info.get_by_text("Prompt:").wait_for(timeout=120_000)
    assert "pitch=" not in info.inner_text()
    pre = info.locator("pre").first
    assert pre.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "the prompt box is cut off"


@pytest.mark.browser
def test_live_knobs_grey_out_and_presets_fit(page):
    from browser_util import pick_option
    page.goto(page.base_url)
    page.wait_for_selector("#live-run")
    page.wait_for_timeout(800)
    branch = page.locator("#live-tree_branch input[type=number]")
    rank = page.locator("#live-rank_threshold input")
    assert branch.is_disabled() and rank.is_disabled()
    assert "no effect now" in page.inner_text("#live-tree_branch")
    assert float(page.locator("#live-tree_branch").evaluate("e => getComputedStyle(e).opacity")) < 0.7
    assert float(page.locator("#live-rank_threshold").evaluate("e => getComputedStyle(e).opacity")) < 0.7
    pick_option(page, "live-draft_tree", "static")
    page.wait_for_function("() => !document.querySelector('#live-tree_branch input[type=number]').disabled",
                           timeout=120_000)
    assert "no effect now" not in page.inner_text("#live-tree_branch")
    pick_option(page, "live-verify", "rank")
    page.wait_for_function("() => !document.querySelector('#live-rank_threshold input').disabled",
                           timeout=120_000)
    assert float(page.locator("#live-tree_branch").evaluate("e => getComputedStyle(e).opacity")) == 1
    # only the greyed knob itself: its accordion and a knob that applies stay as they are
    assert float(page.locator("#live-k").evaluate("e => getComputedStyle(e).opacity")) == 1
    assert page.locator("#live-k").evaluate("e => { for (let p = e; p; p = p.parentElement) "
                                            "if (getComputedStyle(p).opacity !== '1') return false; return true; }")
    # presets by name in words, the picked one's note under the box, nothing cut off
    preset = page.locator(".ss-preset").first
    preset.locator("input").click()
    options = page.locator(".ss-preset [role=option]").all_inner_texts()
    assert options and not any("_" in o for o in options), options
    page.locator(".ss-preset [role=option]", has_text="fluency first").first.click()
    page.wait_for_function("() => document.querySelector('.ss-preset').innerText.includes('max entropy')",
                           timeout=120_000)
    box = preset.locator("input")
    assert box.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), box.input_value()
    assert "ln|V|" not in page.inner_text(".ss-side")


@pytest.mark.browser
def test_live_failed_run_clears_plots_and_upload_is_not_shared(page, tmp_path):
    """A failed run leaves nothing of the previous run (plots included); a share link made
    after an upload says the clip is not in it."""
    import shutil
    from browser_util import wait_state
    page.goto(page.base_url + "?max_new_tokens=12")
    page.wait_for_selector("#live-run")       # the link's knobs are in once its status line says so
    page.wait_for_function("() => document.querySelector('#live-status')?.innerText.includes('share link')")
    page.click("#live-run")
    assert wait_state(page, "live-status", timeout=120_000) in ("ok", "warn", "err")
    page.locator(".js-plotly-plot", has_text="Draft entropy per token").first.wait_for(timeout=120_000)
    # an uploaded (real) clip: the share link carries the knobs only, and says so
    clip = tmp_path / "mine.wav"
    shutil.copy(CLIP, clip)
    page.locator("#live-audio button[aria-label=Clear]").click()
    page.locator("#live-audio input[type=file]").set_input_files(str(clip))
    page.wait_for_timeout(1500)
    page.get_by_text("Export & share").click()
    page.get_by_role("button", name="make share link").click()
    page.wait_for_function("() => document.querySelector('#live-share-note')?.innerText.includes('cannot be shared')",
                           timeout=120_000)
    link = page.locator("#live-share-link textarea, #live-share-link input").first.input_value()
    assert "sample=" not in link and "max_new_tokens=12" in link, link
    # now a run that fails: a file that is not audio
    bad = tmp_path / "notes.wav"
    bad.write_text("this is not audio", encoding="utf-8")
    page.locator("#live-audio button[aria-label=Clear]").click()
    page.locator("#live-audio input[type=file]").set_input_files(str(bad))
    page.wait_for_selector("#live-status [data-state=err]", timeout=120_000)
    page.click("#live-run")
    page.wait_for_function("() => document.querySelector('#live-status')?.innerText.includes('Could not run')",
                           timeout=120_000)
    # every plot back to its empty figure: no bars, no points, the fresh page's notes
    page.wait_for_function("() => document.querySelectorAll('#live-timing .bars path, .ss-cards .ss-card').length === 0"
                           " && [...document.querySelectorAll('.js-plotly-plot')].filter(e =>"
                           " /Draft entropy|Accepted length|Acceptance by draft/.test(e.textContent))"
                           ".every(e => e.querySelectorAll('.scatterlayer .point, .barlayer .point').length === 0)",
                           timeout=120_000)
    assert "No tokens yet" in page.inner_text(".ss-tokens-panel")
    page.get_by_text("What the backend read from the clip").click()
    page.locator("#live-info").get_by_text("Run a clip to see").wait_for(timeout=120_000)


def test_status_names_which_time_each_number_is():
    """0.20 s in the status and 0.17 s in the speed-up: each labelled (wall vs decoding)."""
    from ui.live import finished_detail
    tr = {"tokens": [{}] * 3, "token_ids": [1, 2, 3], "ended_by": "max_tokens",
          "metrics": {"new_tokens": 3, "wall_s": 0.2}}
    from specdec_core.evaluation.bench.speedup import speedup_stats
    detail = finished_detail(tr, DecodeConfig(), {"token_ids": [1, 2, 3]},
                             speedup_stats([0.17, 0.18, 0.17], [0.2, 0.21, 0.2], 3, 1, True))
    assert "0.20 s wall time" in detail and "1.18× faster than cloud-only (1.11–1.24×)" in detail, detail
    assert "ended by max new tokens" in detail


def test_a_shared_fault_and_knobs_show_before_run():
    from components.config_panel import query_to_config
    from ui.live import shared_status
    html = shared_status(query_to_config("faults=input_corruption&k=6"), "sad_01")
    assert 'data-what="fault"' in html and "fault: input corruption" in html and "draft length k 6" in html
    assert 'data-state="idle"' in html
