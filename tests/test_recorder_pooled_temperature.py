"""Issue 36, items 3-4: the pooled temperature check over independent runs only, and text
symptoms of an exact loop read as the model's. Real demo pair, real clips, real example loops.
The rates over 20 seed sets are measured by scripts/pooled_temperature_rate.py
(docs/recorder.md); here a few fixed seed sets keep CI short."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from specdec_core.api import load_backend
from specdec_core.findings import Finding
from specdec_core.recorder.driver.clip import _extra_knobs, load_function, pooled_findings, record_clip
from specdec_core.recorder.report.model_or_decoder import judge_text, model_or_decoder
from specdec_core.recorder.evidence import distinct

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import pooled_temperature_rate as rate  # noqa: E402

SAMPLING = {"k": 4, "max_new_tokens": 128, "temperature": 0.7, "verify": "sampling",
            "prompt_type": "detailed"}
CLIP = rate.CLIPS[0]


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def test_record_gives_a_seed_only_to_decoders_that_take_one():
    def with_seed(edge, cloud, tok, ids, k=4, seed=0): ...
    def without(edge, cloud, tok, ids, k=4, **kw): ...
    assert _extra_knobs(with_seed, {}, None, 7) == {"seed": 7}
    assert _extra_knobs(without, {}, None, 7) == {}     # **kw may be generate()'s: not guessed
    assert _extra_knobs(with_seed, {}, None, None) == {}


def test_the_same_seed_replayed_counts_once(demo):
    fn, path = load_function(str(ROOT / "examples" / "decoders" / "sampling_correct.py"))
    a, b, c = (record_clip(fn, path, demo, CLIP, SAMPLING, seed=s) for s in (3, 3, 4))
    assert a["recording"]["seed"] == 3 and c["recording"]["seed"] == 4
    assert a["token_ids"] == b["token_ids"]
    runs = distinct([a["recording"], b["recording"], c["recording"]])
    assert [r["seed"] for r in runs] == [3, 4]


@pytest.mark.parametrize("seed_set", [0, 1])
def test_correct_sampling_loops_get_no_pooled_temperature_finding(demo, seed_set):
    for name, T, clips in rate.LOOPS[:2]:
        assert not rate.flagged(demo, name, T, seed_set, rate.CLIPS[:clips]), (name, seed_set)


def test_double_temperature_is_still_found_pooled(demo):
    name, T, clips = rate.LOOPS[2]
    assert name == "double_temperature"
    assert rate.flagged(demo, name, T, 0, rate.CLIPS[:clips])


def _leak(severity="error") -> Finding:
    return Finding(code="template_leak", severity=severity, title="chat template leaked into the output",
                   detail="markers found: <|im_start|>", cause="ran past <|im_end|>", fix="stop on the id",
                   evidence={}, explained_by=None)


def _other(code="stale_cache", severity="error") -> Finding:
    return Finding(code=code, severity=severity, title="t", detail="", cause="", fix="", evidence={},
                   explained_by=None)


def test_text_finding_of_an_exact_sampling_loop_is_the_models():
    rec = {"declared": {"temperature": 1.0, "verify": "sampling"}}
    f = model_or_decoder(_leak(), rec, None, [_leak()])
    assert f["severity"] == "warning" and "the cloud alone does this too" in f["cause"]
    assert f["code"] == "template_leak" and f["evidence"]["model_or_decoder"] == "model"
    # another error: the loop is not shown exact, the text may be its bug
    assert model_or_decoder(_leak(), rec, None, [_leak(), _other()])["severity"] == "error"


def test_greedy_text_finding_follows_the_reference():
    rec = {"declared": {"temperature": 0.0, "verify": "greedy"}}
    assert model_or_decoder(_leak(), rec, {"matches": True}, [_leak()])["severity"] == "warning"
    assert model_or_decoder(_leak(), rec, {"matches": False}, [_leak()])["severity"] == "error"
    # no reference and no other error: a text symptom alone is a warning (issue 48 item 1 / 50 item 1)
    alone = model_or_decoder(_leak(), rec, None, [_leak()])
    assert alone["severity"] == "warning" and alone["evidence"]["model_or_decoder"] == "text only"
    out = judge_text([_other("vocab_widths", "info"), _leak()], rec, {"matches": True})
    assert [(f["code"], f["severity"]) for f in out] == [("template_leak", "warning"),
                                                          ("vocab_widths", "info")]


def test_exact_sampling_loop_leaking_the_template_gets_a_warning_not_an_error(demo):
    """heldout2/happy_m5 at T = 1.0, seed 0: the cloud samples `<|im_start|>` itself."""
    fn, path = load_function(str(ROOT / "examples" / "decoders" / "sampling_correct.py"))
    knobs = {**SAMPLING, "temperature": 1.0}
    res = record_clip(fn, path, demo, str(ROOT / "sample_audio" / "heldout2" / "happy_m5.wav"),
                      knobs, seed=0)
    assert "\nuser\n" in res["text"]          # the cloud's next turn (markers are special ids)
    leak = next(f for f in res["findings"] if f["code"] == "template_leak")
    assert leak["severity"] == "warning" and "the cloud alone does this too" in leak["cause"]
    assert not [f for f in res["findings"] if f["severity"] == "error"]
    assert leak in res["trace"]["diagnostics"]
