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
    assert "no cloud rank was recorded" in page


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
    html = vs_cloud_html("a", "a", {"speedup": 1.2, "decode_s": 0.17, "cloud_only_s": 0.2})
    assert "decoding here" in html and "wall time less" in html


def test_a_recording_with_an_error_has_no_green_no_findings_card():
    from components.inspect_view import run_error_html
    html = run_error_html("the cloud timed out")
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
