"""Issue 42, items 3 and 5: tree loops under sampling (EAGLE's own sibling rule and a twin that
does not update the residual between siblings), where a loop resumed after a correction that
repeats its draft, and `run` pooling its clips. Real demo pair, real clips, seeded; the rates
over many seeds are scripts' (scripts/tree_sampling_tv.py, scripts/run_pooled_rate.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdec_core.api import load_backend, prepare
from specdec_core.decoding.config import DecodeConfig
from specdec_core.recorder.driver.builtin import record_builtin
from specdec_core.recorder.driver.clip import load_function, pooled_findings, record_clip

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "decoders"
CLIPS = [str(ROOT / "sample_audio" / f"{c}_01.wav") for c in ("angry", "happy")]
HELDOUT = sorted(str(p) for p in (ROOT / "sample_audio" / "heldout2").glob("*.wav"))[:4]
SAMPLING = {"k": 4, "max_new_tokens": 48, "temperature": 0.7, "verify": "sampling",
            "prompt_type": "detailed"}


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def codes(findings, severity=None) -> set:
    return {f["code"] for f in findings if severity is None or f["severity"] == severity}


def record(demo, name):
    fn, path = load_function(str(EXAMPLES / f"{name}.py"))
    res = [record_clip(fn, path, demo, c, SAMPLING, seed=i) for i, c in enumerate(CLIPS)]
    assert all(r["ok"] for r in res), [r.get("error") for r in res]
    return res


def test_eagle_sibling_rule_is_named_and_gets_no_error_or_temperature_warning(demo):
    res = record(demo, "tree_eagle_sampling")
    for r in res:
        assert codes(r["findings"], "error") == set(), r["findings"]
        assert "hidden_draft_processing" not in codes(r["findings"]), r["findings"]
        rule = [f for f in r["findings"] if f["code"] == "sampling_rule"]
        assert rule and rule[0]["evidence"]["rule"] == "sibling_tree" and rule[0]["evidence"]["n_nodes"] >= 5
        assert r["recording"]["draft_shape"] == "tree"
    pooled = pooled_findings(res)
    assert codes(pooled) == {"sampling_rule"}, pooled


def test_residual_not_updated_between_siblings_is_an_error(demo):
    res = record(demo, "tree_eagle_sampling_no_residual")
    hits = [f for r in res for f in r["findings"] if f["code"] == "sibling_resampled"]
    assert len(hits) == len(res), [codes(r["findings"]) for r in res]
    f = hits[0]
    assert f["severity"] == "error" and f["evidence"]["tokens"][0] in f["evidence"]["siblings"]
    assert f["cause"] and f["fix"]
    # the repeated sibling is read as the loop's correction, not as a context the loop got wrong
    assert not {"context_mismatch", "stale_cache"} & codes(f for r in res for f in r["findings"])
    assert "sibling_resampled" in codes(pooled_findings(res))


def test_builtin_tree_sampling_is_the_exact_rule(demo):
    cfg = DecodeConfig(draft_tree="dynamic", verify="sampling", temperature=0.7, max_new_tokens=48)
    found = record_builtin(demo, prepare(demo, CLIPS[0], cfg), cfg)[2]
    assert codes(found, "error") == set() and "sampling_rule" in codes(found), found
    assert "not_judged" not in codes(found), found      # the prompt fed with the first tree is no node


def test_a_sampled_correction_equal_to_its_draft_is_no_context_error(demo):
    """verify=greedy at T = 0.7 samples the correction from p: on happy_01 (seed 0) round 8's
    rejected draft is drawn again as the correction; read as an acceptance, the next round's
    drafts looked like a wrong context (a false context_mismatch before resumed.py)."""
    cfg = DecodeConfig(temperature=0.7)
    rec, trace, found, own = record_builtin(demo, prepare(demo, CLIPS[1], cfg), cfg)
    assert codes(found, "error") == set(), found
    from specdec_core.recorder.evidence.rounds import build_rounds
    from specdec_core.recorder.evidence.tape import build_tapes
    t = build_tapes(rec)
    build_rounds(t)     # {verify forward i: the position where the loop resumed}
    assert t.resumed, "the loop's next round resumed before the committed text's end of the round"
    corrected = [t["i"] for t in own.to_dict()["tokens"] if t["source"] == "corrected"]
    assert corrected == [t["i"] for t in trace.to_dict()["tokens"] if t["source"] == "corrected"]


def test_run_pools_its_clips_and_names_the_doubled_temperature(capsys):
    from specdec_core.cli import main

    # seed set 3 of scripts/run_pooled_rate.py (clip i gets seed 3000 + i)
    base = ["run", *HELDOUT, "--set", "temperature=0.7", "--set", "seed=3000", "--out", "-"]
    assert main(base + ["--fault", "double_temperature"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert [f["code"] for f in data["pooled_findings"]] == ["hidden_draft_processing"]
    assert "all 4 clips pooled: hidden_draft_processing" in err
    assert [r["trace"]["config"]["seed"] for r in data["results"]] == [3000, 3001, 3002, 3003]
    assert main(base) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["pooled_findings"] == [] and "pooled" not in err
    assert all(codes(r["trace"]["diagnostics"], "error") == set() for r in data["results"])
