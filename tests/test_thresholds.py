"""Entropy thresholds that mean the same on any vocabulary (issue 14 part 3).

entropy_unit=frac reads entropy_threshold as a fraction of ln|V|; the decoder resolves it to
nats once per run (trace info entropy_threshold_nats, vocab_size) and the plot, the cards and the
metric share_above_threshold all read that resolved value. Real demo runs and tiny real models;
the demo models get retrained, so these tests assert relations, never exact demo outputs."""
from __future__ import annotations

import json
import math
from pathlib import Path

import gradio as gr
import pytest

from components.cards import metric_cards
from components.config_panel import (checked_for_widgets, query_to_config, widget_settings,
                                     widget_value)
from components.plots import entropy_figure
from specdec_core import DecodeConfig
from specdec_core.api import LiveTrace, load_backend, prepare, run_clip, stream_prompt
from specdec_core.decoding.config import KNOBS, PRESET_HELP, PRESETS, preset
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.decoding.run import logits_width
from specdec_core.decoding.runner import ModelRunner
from specdec_core.errors import ConfigError
from tiny import PairBackend, tiny_qwen2

CLIP = str(Path(__file__).resolve().parents[1] / "sample_audio" / "happy_01.wav")
QWEN = 151_936
DRAFTED = ("accepted", "draft")


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def _trace(demo, **knobs) -> dict:
    return run_clip(demo, CLIP, DecodeConfig.from_dict({"k": 4, **knobs}))["trace"]


def _drafted(tr: dict) -> list[float]:
    """Entropies of every drafted token: committed drafts and rejected ones."""
    recs = [t for t in tr["tokens"] if t["source"] in DRAFTED] + tr["rejected"]
    return [r["entropy"] for r in recs if r["entropy"] is not None]


def _decisions(tr: dict):
    """Everything the gate decides: tokens, who committed them, which rounds called the cloud."""
    return (tr["token_ids"], [t["source"] for t in tr["tokens"]], [t["id"] for t in tr["rejected"]],
            [(r["verified"], r["drafted"], r["accepted"]) for r in tr["rounds"]])


@pytest.fixture(scope="module")
def mixed(demo):
    """A fraction of ln|V| that lets some demo blocks through and sends others to the cloud:
    the 75th percentile of a classic run's draft entropies, halfway between two of them."""
    classic = _trace(demo)
    ents = sorted(set(_drafted(classic)))
    assert len(ents) >= 8, "the demo run drafted too few distinct entropies to place a threshold"
    i = (3 * len(ents)) // 4
    nats = (ents[i - 1] + ents[i]) / 2
    vocab = classic["info"]["vocab_size"]
    frac = nats / math.log(vocab)
    tr = _trace(demo, entropy_unit="frac", entropy_threshold=frac)
    return frac, vocab, tr


# ---- the knob ---------------------------------------------------------------------------------

@pytest.mark.parametrize("knobs, needle", [
    ({"entropy_threshold": -0.5},
     "entropy_threshold must be in [0.0, 20.0] nats or inf (entropy_unit=nats), got -0.5"),
    ({"entropy_threshold": 20.5}, "entropy_threshold must be in [0.0, 20.0] nats or inf"),
    ({"entropy_threshold": 5.75, "entropy_unit": "frac"},
     "entropy_threshold must be in [0.0, 1.0] as a fraction of ln|V|; entropy_unit=nats takes nats "
     "(entropy_unit=frac), got 5.75"),
    ({"entropy_threshold": -0.1, "entropy_unit": "frac"}, "entropy_threshold must be in [0.0, 1.0]"),
    ({"entropy_threshold": "inf", "entropy_unit": "frac"},
     "entropy_threshold must be a finite number in [0.0, 1.0] as a fraction of ln|V|"),
    ({"entropy_threshold": 0.5, "entropy_unit": "bits"},
     "entropy_unit must be one of nats, frac, got 'bits'"),
])
def test_threshold_is_refused_outside_its_units_range_in_one_line(knobs, needle):
    for order in (knobs, dict(reversed(list(knobs.items())))):   # order of keys does not matter
        with pytest.raises(ConfigError) as e:
            DecodeConfig.from_dict(order)
        assert needle in str(e.value) and "\n" not in str(e.value)


def test_each_unit_accepts_its_whole_range_through_every_entry_point():
    for v in (0.0, 1.5, 20.0, math.inf, None):
        assert DecodeConfig(entropy_threshold=v).entropy_threshold == v
    for v in (0.0, 0.482, 1.0, None):
        assert DecodeConfig(entropy_threshold=v, entropy_unit="frac").entropy_threshold == v
    c = DecodeConfig(entropy_threshold=0.482, entropy_unit="frac")
    assert DecodeConfig.from_json(c.to_json()) == c                           # JSON
    assert DecodeConfig.from_overrides(sets=["entropy_threshold=0.482", "entropy_unit=frac"]) == c  # --set
    link = "entropy_threshold=0.482&entropy_unit=frac"                          # share link
    assert DecodeConfig.from_dict(checked_for_widgets(query_to_config(link))) == c
    with pytest.raises(ConfigError, match=r"entropy_threshold must be in \[0.0, 1.0\]"):
        checked_for_widgets(query_to_config("entropy_threshold=3&entropy_unit=frac"))
    # the resolution itself
    assert c.threshold_nats(772) == pytest.approx(0.482 * math.log(772))
    assert DecodeConfig(entropy_threshold=1.5).threshold_nats(772) == 1.5
    assert DecodeConfig(entropy_threshold=None, entropy_unit="frac").threshold_nats(772) is None


def test_widget_bounds_are_each_units_validation_bounds():
    """One source of truth: the panel's slider bounds come from the schema, per unit."""
    spec = KNOBS["entropy_threshold"]
    assert [u.name for u in spec.units] == list(KNOBS["entropy_unit"].choices) == ["nats", "frac"]
    assert (spec.minimum, spec.maximum) == (0.0, 20.0)   # the default unit's range
    for unit, hi in (("nats", 20.0), ("frac", 1.0)):
        w = widget_settings("entropy_threshold", {"entropy_unit": unit})
        assert (w["minimum"], w["maximum"]) == (0.0, hi)
        for edge in (w["minimum"], w["maximum"]):
            DecodeConfig(entropy_threshold=edge, entropy_unit=unit)
        for beyond in (w["minimum"] - w["step"], w["maximum"] + w["step"]):
            with pytest.raises(ConfigError, match="entropy_threshold"):
                DecodeConfig(entropy_threshold=beyond, entropy_unit=unit)
    frac = {"entropy_unit": "frac"}
    assert "ln|V|" in widget_settings("entropy_threshold", frac)["label"]
    assert widget_value("entropy_threshold", frac, 0.4) == 0.4
    assert 0 < widget_value("entropy_threshold", frac, 2.0) <= 1.0     # out of range: the start
    assert widget_value("entropy_threshold", {"entropy_unit": "nats"}, 0.4) == 0.4


# ---- presets ----------------------------------------------------------------------------------

def test_presets_are_the_notes_nats_as_fractions_and_say_both():
    for name, nats in (("fluency_first", 5.75), ("quality_first", 3.25), ("seed000_fixed", 1.5)):
        f = PRESETS[name]["entropy_threshold"]
        assert PRESETS[name]["entropy_unit"] == "frac" and f == round(nats / math.log(QWEN), 3)
        assert preset(name).threshold_nats(QWEN) == pytest.approx(nats, abs=0.01)
        assert f"{f:g}·ln|V| = {nats:.2f} nats on Qwen" in PRESET_HELP[name]
        assert f"{f * math.log(772):.2f} on the demo" in PRESET_HELP[name]
    assert "0.482·ln|V| = 5.75 nats on Qwen, 3.20 on the demo" in PRESET_HELP["fluency_first"]


def _width(backend, prompt) -> int:
    """|V| measured: the width of the logits the edge runner really returns."""
    r = backend.make_runner(backend.edge, "edge")
    r.prefill(prompt)
    return r.feed([int(prompt.input_ids[0, -1])]).shape[-1]


def test_a_preset_is_the_same_fraction_of_ln_v_on_two_vocabularies(demo, tok):
    f = PRESETS["quality_first"]["entropy_threshold"]
    tiny = PairBackend(tiny_qwen2(100, seed=3), tiny_qwen2(100, seed=4), tok)
    runs = []
    for backend, prompt in ((demo, prepare(demo, CLIP, DecodeConfig())),
                            (tiny, tiny.build_inputs(None, "detailed", ids=[4, 5, 6, 7]))):
        tr = SpeculativeDecoder(backend, preset("quality_first", max_new_tokens=16)).run(prompt).to_dict()
        vocab, nats = tr["info"]["vocab_size"], tr["info"]["entropy_threshold_nats"]
        assert vocab == _width(backend, prompt)
        assert nats / math.log(vocab) == pytest.approx(f, rel=1e-12)
        assert tr["metrics"]["entropy_threshold_nats"] == nats
        assert tr["config"]["entropy_threshold"] == f and tr["config"]["entropy_unit"] == "frac"
        runs.append((vocab, nats))
    (v1, n1), (v2, n2) = runs
    assert v1 != v2 and n1 != pytest.approx(n2)      # same fraction, different nats
    # and nats stay nats on any vocabulary
    for backend in (demo, tiny):
        cfg = DecodeConfig(entropy_threshold=1.5, max_new_tokens=4)
        prompt = tiny.build_inputs(None, "detailed", ids=[4, 5]) if backend is tiny else \
            prepare(demo, CLIP, cfg)
        assert SpeculativeDecoder(backend, cfg).run(prompt).info["entropy_threshold_nats"] == 1.5


def test_logits_width_without_a_shared_vocabulary_is_the_heads():
    model = tiny_qwen2(37, seed=5)
    assert logits_width(ModelRunner(model)) == 37
    assert logits_width(ModelRunner(model, vocab_size=30)) == 30


# ---- the decoder ------------------------------------------------------------------------------

def test_frac_calls_the_cloud_exactly_like_its_nats_value(demo, mixed):
    frac, vocab, tr_frac = mixed
    m = tr_frac["metrics"]
    assert 0 < m["cloud_calls"] < m["rounds"], "the threshold should verify some blocks, not all"
    nats = frac * math.log(vocab)
    assert tr_frac["info"]["entropy_threshold_nats"] == pytest.approx(nats, rel=1e-12)
    tr_nats = _trace(demo, entropy_threshold=nats)
    assert _decisions(tr_nats) == _decisions(tr_frac)
    assert tr_nats["info"]["entropy_threshold_nats"] == tr_frac["info"]["entropy_threshold_nats"]
    for key in ("cloud_calls", "share_above_threshold", "acceptance_rate", "entropy_threshold_nats"):
        assert tr_nats["metrics"][key] == m[key], key
    # what the user set stays in the config
    assert (tr_frac["config"]["entropy_threshold"], tr_frac["config"]["entropy_unit"]) == (frac, "frac")
    # the unit matters: the same number read as nats is a much lower gate
    tr_low = _trace(demo, entropy_threshold=frac)
    assert tr_low["metrics"]["cloud_calls"] > m["cloud_calls"]


def test_share_above_threshold_counts_drafted_tokens(demo, mixed):
    _, _, tr = mixed
    thr = tr["info"]["entropy_threshold_nats"]
    ents = _drafted(tr)
    assert tr["rejected"], "a mixed run on the demo should have rejected drafts too"
    share = sum(e > thr for e in ents) / len(ents)
    assert 0 < share < 1
    assert tr["metrics"]["share_above_threshold"] == pytest.approx(share, abs=1e-4)
    # the cloud's own tokens (corrections, bonus) are not drafts and carry no entropy
    assert all(t["entropy"] is None for t in tr["tokens"] if t["source"] not in DRAFTED)
    off = _trace(demo, entropy_threshold=None)
    assert off["metrics"]["share_above_threshold"] is None and off["info"]["entropy_threshold_nats"] is None
    never = _trace(demo, entropy_threshold="inf")
    assert never["metrics"]["share_above_threshold"] == 0.0 and never["metrics"]["cloud_calls"] == 0


# ---- what the user sees -----------------------------------------------------------------------

def _label(tr: dict) -> str:
    thr, vocab = tr["info"]["entropy_threshold_nats"], tr["info"]["vocab_size"]
    ents = _drafted(tr)
    share = sum(e > thr for e in ents) / len(ents)
    return (f"threshold {thr:.2f} nats ({thr / math.log(vocab):.2f}·ln|V|) — "
            f"{share:.0%} of drafted tokens above")


def test_entropy_plot_draws_the_resolved_threshold_with_its_share(mixed):
    frac, _, tr = mixed
    fig = entropy_figure(tr)
    line = fig.layout.shapes[0]
    assert line.y0 == line.y1 == pytest.approx(tr["info"]["entropy_threshold_nats"])
    assert line.y0 != pytest.approx(frac)                     # nats, not the fraction
    assert [a.text for a in fig.layout.annotations] == [_label(tr)]
    assert f"({frac:.2f}·ln|V|)" in _label(tr)
    cards = metric_cards(tr["metrics"])
    assert "above threshold" in cards and f"{tr['metrics']['share_above_threshold']:.0%}" in cards


def test_entropy_plot_while_streaming_reads_the_threshold_from_the_start_event(demo, mixed):
    frac = mixed[0]
    cfg = DecodeConfig(k=4, entropy_unit="frac", entropy_threshold=frac)
    live, checked = LiveTrace(cfg.to_dict(), demo.tokenizer), False
    for ev in stream_prompt(demo, prepare(demo, CLIP, cfg), cfg):
        live.add(ev)
        if ev["type"] == "round" and not checked and _drafted(live.trace):
            fig = entropy_figure(live.trace)
            assert fig.layout.shapes[0].y0 == pytest.approx(frac * math.log(live.trace["info"]["vocab_size"]))
            assert fig.layout.annotations[0].text == _label(live.trace)
            checked = True
    assert checked and live.done


def test_entropy_plot_off_and_inf(demo):
    off = entropy_figure(_trace(demo, entropy_threshold=None, max_new_tokens=8))
    assert not off.layout.shapes and "threshold off" in off.layout.annotations[0].text
    inf = entropy_figure(_trace(demo, entropy_threshold="inf", max_new_tokens=8))
    assert not inf.layout.shapes and "never called" in inf.layout.annotations[0].text
    assert all(math.isfinite(v) for v in inf.layout.yaxis.range)


# ---- the knob panels of the Live and A/B tabs ---------------------------------------------------

def _values(panel, cfg: dict) -> list:
    """What the browser sends for `cfg`: one value per widget of panel.inputs."""
    full = {**{n: KNOBS[n].default for n in panel.names}, **cfg}
    vals = [full[n] if full[n] is not None else 0.0 for n in panel.names]
    return vals + [full[n] is None for n in panel.off]


def _update(panel, updates, name):
    return updates[panel.inputs.index(panel.widgets[name])]


@pytest.fixture(scope="module")
def tabs():
    from ui.ab import ABTab
    from ui.live import LiveTab

    with gr.Blocks():
        live = LiveTab()
        ab = ABTab(live)
    return live, ab


def test_panel_applies_a_frac_preset_with_the_units_range(tabs):
    from ui.knobs import KnobPanel, preset_config

    live, _ = tabs
    panel = live.panel
    assert "entropy_unit" in panel.names
    ups = panel.updates_for(preset_config("quality_first"))
    thr = _update(panel, ups, "entropy_threshold")
    assert (thr["value"], thr["minimum"], thr["maximum"]) == (0.272, 0.0, 1.0) and "max entropy" in thr["label"]
    assert _update(panel, ups, "entropy_unit")["value"] == "frac"
    back = panel.updates_for(preset_config("classic"))          # threshold off, unit nats again
    thr = _update(panel, back, "entropy_threshold")
    assert thr["maximum"] == 20.0 and thr["interactive"] is False
    assert DecodeConfig.from_dict(panel.to_config(_values(panel, preset_config("quality_first")))) == \
        DecodeConfig.from_dict(preset_config("quality_first"))
    switch = KnobPanel._unit_switch("entropy_unit", "entropy_threshold")
    to_frac = switch("frac", 2.0)
    assert to_frac["maximum"] == 1.0 and 0 <= to_frac["value"] <= 1.0
    to_nats = switch("nats", 0.3)
    assert to_nats["maximum"] == 20.0 and to_nats["value"] == 0.3


def test_live_tab_json_and_share_link_carry_the_unit(tabs):
    live, _ = tabs
    cfg = {"entropy_threshold": 0.3, "entropy_unit": "frac"}
    values = _values(live.panel, cfg)
    text = live.knobs_to_json(*values)
    assert json.loads(text)["entropy_unit"] == "frac"
    ups = live.json_to_knobs(text, *values)
    assert _update(live.panel, ups, "entropy_threshold")["maximum"] == 1.0
    q, note = live.share_query("", None, False, *values)
    assert "entropy_unit=frac" in q and "entropy_threshold=0.3" in q


def test_ab_tab_runs_a_frac_side_against_its_nats_twin(tabs, demo, mixed):
    _, ab = tabs
    frac, vocab, _ = mixed
    a = {"entropy_threshold": frac, "entropy_unit": "frac", "max_new_tokens": 32}
    b = {"entropy_threshold": frac * math.log(vocab), "entropy_unit": "nats", "max_new_tokens": 32}
    va, vb = _values(ab.panel_a, a), _values(ab.panel_b, b)
    swapped = ab.swap(*va, *vb)
    n = len(ab.panel_a.inputs)
    assert _update(ab.panel_a, swapped[:n], "entropy_threshold")["maximum"] == 20.0
    assert _update(ab.panel_b, swapped[n:], "entropy_threshold")["maximum"] == 1.0
    faulted = ab.set_fault("no_resync", *va)       # B = A + fault keeps A's unit
    assert _update(ab.panel_b, faulted, "entropy_unit")["value"] == "frac"
    *_, last = ab.run(None, "happy_01", None, "demo", False, *va, *vb)
    n_view = len(ab.view_a.outputs)
    view_a, view_b = last[1:1 + n_view], last[1 + n_view:1 + 2 * n_view]
    fig_a = view_a[ab.view_a.outputs.index(ab.view_a.entropy)]
    fig_b = view_b[ab.view_b.outputs.index(ab.view_b.entropy)]
    assert fig_a.layout.shapes[0].y0 == pytest.approx(fig_b.layout.shapes[0].y0)
    assert fig_a.layout.annotations[0].text == fig_b.layout.annotations[0].text
    assert "ln|V|" in fig_a.layout.annotations[0].text
