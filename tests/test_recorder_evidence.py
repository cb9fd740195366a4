"""Issue 47: one canonical recording, one Evidence. An analysis replays the caches once and
builds its tapes and rounds once (a sampled chain loop that resumed at its own correction: the
cut is read with the rounds, in one pass), a batched recording once per row judged; the pooled
checks read the clip's canonical Evidence (its row of a batch), never the raw recording."""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from specdec_core.api import load_backend, prepare
from specdec_core.decoding.config import DecodeConfig
from specdec_core.recorder import analyze
from specdec_core.recorder.analyze import evidence_of
from specdec_core.recorder.checks import registry
from specdec_core.recorder.driver.builtin import record_builtin
from specdec_core.recorder.driver.clip import load_function, pooled_findings, record_clip
from specdec_core.recorder.evidence.tape import BUILDS

ROOT = Path(__file__).resolve().parents[1]
CLIP = str(ROOT / "sample_audio" / "happy_01.wav")
BATCHED = ROOT / "examples" / "decoders" / "batched" / "lucidrains_batched.py"


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def builds(rec, tok) -> dict:
    BUILDS.clear()
    analyze(rec, tok)
    return dict(BUILDS)


def test_a_sampled_loop_that_resumed_is_built_once(demo):
    cfg = DecodeConfig(temperature=0.7)
    rec, *_ = record_builtin(demo, prepare(demo, CLIP, cfg), cfg)
    assert builds(rec, demo.tokenizer) == {"replays": 1, "tapes": 1, "rounds": 1}
    assert evidence_of(rec).t.resumed, "happy_01 at T=0.7 (seed 0) resumes at its own correction"


@pytest.mark.parametrize("temperature,rows", [(0.0, 3), (0.8, 1)])
def test_a_batched_recording_is_built_once_per_row_judged(demo, temperature, rows):
    fn, path = load_function(str(BATCHED))
    knobs = {"k": 4, "max_new_tokens": 16, "temperature": temperature,
             "verify": "sampling" if temperature else "greedy", "prompt_type": "detailed"}
    res = record_clip(functools.partial(fn, row=1), path, demo, CLIP, knobs)
    assert res["ok"], res.get("error")
    got = builds(res["recording"], demo.tokenizer)
    assert got["tapes"] == got["rounds"] == rows, got
    assert got["replays"] <= rows + 1, got    # a row's replay serves its inferred output and trim
    e = evidence_of(res["recording"])
    assert e.rec["batch_row"] == 1 and all((f.get("batch") or 1) == 1 for f in e.rec["forwards"])
    # the pooled checks read that canonical row, not the batched recording
    BUILDS.clear()
    pooled_findings([res, dict(res, recording=dict(res["recording"], seed=1))])
    assert BUILDS["tapes"] <= 1, dict(BUILDS)   # the copy is analysed; the clip's Evidence is kept


def test_every_check_is_registered_once_with_registered_codes():
    registry.load()
    names = [(c.fn.__module__, c.fn.__name__) for c in registry.CHECKS]
    assert len(names) == len(set(names))
    assert all(c.scope in registry.SCOPES and c.codes for c in registry.CHECKS)


def test_a_tree_loop_builds_each_round_tree_once(demo, monkeypatch):
    from specdec_core.recorder.evidence import tree_trace

    fn, path = load_function(str(ROOT / "examples" / "decoders" / "tree_correct.py") + ":decode")
    res = record_clip(fn, path, demo, CLIP, {"k": 4, "max_new_tokens": 24, "temperature": 0.0,
                                             "verify": "greedy", "prompt_type": "detailed"})
    assert res["ok"], res.get("error")
    calls, real = [], tree_trace.round_tree
    monkeypatch.setattr(tree_trace, "round_tree", lambda rnd, *a: calls.append(rnd.n) or real(rnd, *a))
    trace, _ = analyze(res["recording"], demo.tokenizer)
    trees = [r.round for r in trace.rounds if r.tree]
    assert trees and sorted(calls) == trees      # the trace and the `trees` check read one build


def test_a_pooled_form_sums_every_runs_data_in_its_pooled_order():
    pooled = registry.pooled_sum(lambda e: {"xs": [e], "n": 1, "declared": {"run": e}},
                                 lambda data, scope: [dict(data, scope=scope)])
    assert pooled([1]) == []                     # a pooled form reads 2+ distinct runs
    assert pooled([1, 2, 3]) == [{"xs": [1, 2, 3], "n": 3, "declared": {"run": 3},
                                  "scope": "3 distinct runs pooled"}]
    registry.load()
    forms = [c.fn.__name__ for c in sorted((c for c in registry.CHECKS if c.pooled),
                                           key=lambda c: c.pooled_order)]
    assert forms == ["check_draft_rule", "penalty", "tree_sampling", "sampling"], forms
