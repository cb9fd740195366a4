"""2026's bug classes in users' loops (issue 48) and what a user reads about them (issue 50,
items 1-2): each class a correct loop and a buggy twin in examples/decoders/field/, recorded on
two sample clips, greedy and sampling (T = 0.8). An error only with proof: no error on a correct
loop; the buggy twin's defect named by its code. Short outputs keep the suite's time small."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specdec_core.api import load_backend
from specdec_core.findings import finding
from specdec_core.recorder import load_function, record_clip
from specdec_core.recorder.report.model_or_decoder import model_or_decoder

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples" / "decoders"
CLIPS = [str(ROOT / "sample_audio" / f"{c}.wav") for c in ("angry_01", "happy_02")]
GREEDY = {"k": 4, "max_new_tokens": 48, "temperature": 0.0, "verify": "greedy", "prompt_type": "detailed"}
SAMPLING = {**GREEDY, "temperature": 0.8, "verify": "sampling"}
MODES = {"greedy": GREEDY, "sampling": SAMPLING}


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def record(demo, target, mode, clips=CLIPS, reference=False):
    fn, path = load_function(str(EX / target))
    out = [record_clip(fn, path, demo, c, MODES[mode], reference=reference, seed=i)
           for i, c in enumerate(clips)]
    assert all(r["ok"] for r in out), [r.get("error") for r in out]
    return out


def errors(res):
    return {f["code"] for f in res["findings"] if f["severity"] == "error"}


def one(res, code):
    return next(f for f in res["findings"] if f["code"] == code)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("target", ["field/verify_scores.py", "field/verify_generates.py",
                                    "field/window_drafter.py", "field/draft_length_limit.py",
                                    "field/draft_length_dummy.py"])
def test_lossless_loops_get_no_error(demo, target, mode):
    """Correct twins, and the twins whose defect is speed (generate-verifier, dummy drafts):
    lossless, so never an error; greedy ones equal the cloud's own greedy decode."""
    for res in record(demo, target, mode, reference=mode == "greedy"):
        assert errors(res) == set(), (res["audio"], res["findings"])
        if mode == "greedy":
            assert res["reference"]["matches"], res["reference"]["first_divergence"]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_window_drafter_is_a_layout_and_its_lagging_twin_a_context_error(demo, mode):
    ok = record(demo, "field/window_drafter.py", mode, CLIPS[:1])[0]
    assert ok["trace"]["metrics"]["acceptance_rate"] > 0.3    # rounds rebuilt with their drafts
    for res in record(demo, "field/window_drafter_lagging.py", mode):
        assert errors(res) == {"context_mismatch"}, res["findings"]
        assert one(res, "context_mismatch")["evidence"]["model"] == "edge"


@pytest.mark.parametrize("mode", sorted(MODES))
def test_verify_that_generates_is_one_round_with_its_speed_cost(demo, mode):
    results = record(demo, "field/verify_generates.py", mode)
    for res in results:
        f = one(res, "verify_generates")
        ev = f["evidence"]
        assert f["severity"] == "warning" and ev["forwards_per_token"] > 1.0 > 2 * ev["scoring_per_token"]
        m = res["trace"]["metrics"]
        assert m["acceptance_rate"] > 0.5 and m["cloud_calls"] == ev["rounds"] == ev["scoring_forwards"]
        assert {t["source"] for t in res["trace"]["tokens"]} <= {"accepted", "corrected", "bonus"}
    if mode == "sampling":      # the rule is judged on the rounds' drafts, not on a handful
        rule = one(results[0], "sampling_rule")
        judged = int(re.search(r"of (\d+) judged drafts", rule["detail"]).group(1))
        assert judged >= 20 and "sample-and-match" in rule["title"], rule
    assert "verify_generates" not in {f["code"] for r in record(demo, "field/verify_scores.py", mode, CLIPS[:1])
                                      for f in r["findings"]}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_acceptance_collapse_says_where_and_what_it_costs(demo, mode):
    for res in record(demo, "field/draft_length_dummy.py", mode):
        f = one(res, "acceptance_collapse")
        ev = f["evidence"]
        # DRAFT_MAX_LEN 68 with a 54-id prompt and k = 4: no real draft past output position 10-14
        assert f["severity"] == "warning" and 10 <= ev["position"] <= 15, f
        assert ev["rounds_wasted"] >= 20 and ev["drafts_wasted"] >= 4 * ev["rounds_wasted"] - 4
        assert ev["acceptance_after"] == 0.0 and ev["acceptance_before"] > 0.4
        assert f"position {ev['position']}" in f["title"] and "for nothing" in f["detail"]
    for res in record(demo, "field/draft_length_limit.py", mode):
        assert "acceptance_collapse" not in {f["code"] for f in res["findings"]}


def test_edge_fed_a_token_twice_is_rooted_at_its_context_not_a_stale_cache(demo):
    """Issue 50 item 2: both caches cropped right, the edge re-fed `seq[seen - 1:]`."""
    for res in record(demo, "token_fed_twice_edge.py", "greedy"):
        tops = [f for f in res["findings"] if f["severity"] == "error" and not f["explained_by"]]
        assert [f["code"] for f in tops] == ["context_mismatch"], res["findings"]
        assert "stale_cache" not in {f["code"] for f in res["findings"]}
        assert "fed twice" in tops[0]["cause"] and "seq[cache_len:]" in tops[0]["fix"]


def test_both_stale_caches_are_named(demo):
    """Issue 50 item 2: no_resync leaves drafts in BOTH caches; the root names both."""
    res = record(demo, "no_resync.py", "greedy", CLIPS[:1])[0]
    f = one(res, "stale_cache")
    assert f["severity"] == "error" and set(f["evidence"]["models"]) == {"edge", "cloud"}
    assert f["title"].startswith("edge and cloud") and "cloud forward" in f["detail"]


def test_a_text_symptom_alone_is_a_warning():
    rec = {"declared": {"temperature": 0.0, "verify": "greedy"}}
    dbl = finding("doubling", "3 doubled spans", "d", "tokens appended to the input twice", "f")
    alone = model_or_decoder(dbl, rec, None, [dbl])
    assert alone["severity"] == "warning" and "only the text shows this" in alone["cause"]
    root = finding("context_mismatch", "t", "d", "c", "f")
    assert model_or_decoder(dbl, rec, None, [dbl, root])["severity"] == "error"
    diverged = {"matches": False, "first_divergence": {"cause": "decoder"}}
    assert model_or_decoder(dbl, rec, diverged, [dbl])["severity"] == "error"


def test_readme_omni_correct_example_gets_no_error(tmp_path):
    """Issue 50 item 1: the README's command (default max_new_tokens) on the tiny random pair,
    whose text repeats characters: `doubling` is at most a warning, no error."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPECSCOPE_OMNI_FORCE_CPU": "1"}
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_omni.py"), str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    env.update(SPECSCOPE_EDGE_MODEL=str(tmp_path / "edge"), SPECSCOPE_CLOUD_MODEL=str(tmp_path / "cloud"))
    p = subprocess.run([sys.executable, "-m", "specdec_core", "record",
                        str(EX / "omni" / "omni_correct.py"), str(ROOT / "sample_audio" / "angry_01.wav"),
                        "--backend", "omni", "--fail-on", "error", "--out", str(tmp_path / "rec.json")],
                       capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    found = json.loads((tmp_path / "rec.json").read_text())["results"][0]["findings"]
    assert not [f for f in found if f["severity"] == "error"], found
    assert all(f["severity"] == "warning" for f in found if f["code"] == "doubling")
