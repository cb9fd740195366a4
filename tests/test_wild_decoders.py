"""Speculative decoders copied from public code (examples/decoders/wild/, thin adapters) recorded
on the demo pair, on a sample clip and a held-out clip: the correct ones get no error finding
and rebuilt rounds, the buggy ones the code of their cause (our reading of each is in the
adapter's header and examples/decoders/README.md, "Decoders from public code")."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specdec_core.api import load_backend
from specdec_core.recorder.driver.clip import load_function, record_clip

ROOT = Path(__file__).resolve().parents[1]
WILD = ROOT / "examples" / "decoders" / "wild"
CLIPS = [str(ROOT / "sample_audio" / "angry_01.wav"),
         str(ROOT / "sample_audio" / "unheard" / "sad_f4.wav")]
GREEDY = {"k": 4, "max_new_tokens": 128, "temperature": 0.0, "verify": "greedy",
          "prompt_type": "detailed"}
SAMPLING = {**GREEDY, "temperature": 0.7, "verify": "sampling"}

# target -> (declared knobs, error codes expected: set() = a correct loop)
CASES = {
    "hf_assisted.py:decode": (GREEDY, set()),
    "hf_assisted.py:decode_sampling": (SAMPLING, set()),
    "romsto.py:decode": (GREEDY, {"lossless_violation"}),
    "romsto.py:decode_sampling": (SAMPLING, set()),
    # no stop at all: the stop id is committed and decoding runs on (the template leaks after it)
    "feifeibear.py:decode": (SAMPLING, {"missed_eos", "template_leak"}),
    "feifeibear.py:decode_v2": (SAMPLING, {"missed_eos", "template_leak"}),
    "gpt_fast.py:decode": (SAMPLING, {"missed_eos", "template_leak"}),
}


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def run(demo, target, knobs, clip, seed=0):
    fn, path = load_function(f"{WILD}/{target}")
    torch.manual_seed(seed)
    return record_clip(fn, path, demo, clip, knobs)


@pytest.mark.parametrize("target", sorted(CASES))
def test_wild_decoder_gets_its_cause_and_rebuilt_rounds(demo, target):
    knobs, expected = CASES[target]
    for clip in CLIPS:
        res = run(demo, target, knobs, clip)
        assert res["ok"], res.get("error")
        errors = {f["code"] for f in res["findings"] if f["severity"] == "error"}
        if expected:
            primary = sorted(expected)[0] if len(expected) == 1 else "missed_eos"
            assert primary in errors and errors <= expected, (clip, res["findings"])
        else:
            assert errors == set(), (clip, res["findings"])
        tr = res["trace"]
        # the rounds are rebuilt: every committed token has a verified origin, and there are
        # about as many rounds as cloud verifications (a recorder that loses the cache tape
        # rebuilds 1-2 rounds and marks the rest 'draft')
        assert {t["source"] for t in tr["tokens"]} <= {"accepted", "corrected", "bonus"}, clip
        assert len(tr["rounds"]) >= len(res["token_ids"]) // (knobs["k"] + 1), clip


def test_lossless_violation_names_an_accepted_low_rank_draft(demo):
    res = run(demo, "romsto.py:decode", GREEDY, CLIPS[0])
    f = next(f for f in res["findings"] if f["code"] == "lossless_violation")
    assert f["evidence"]["position"] is not None and f["evidence"]["forward"] is not None


def test_legacy_tuple_caches_keep_one_tape_per_model(demo):
    """feifeibear's KVCacheModel hands the model a new cache object every forward (legacy tuples,
    sliced on rollback): the recording still shows one cache per model."""
    res = run(demo, "feifeibear.py:decode", SAMPLING, CLIPS[0])
    fw = res["recording"]["forwards"]
    by_model = {m: {f["cache"] for f in fw if f["model"] == m} for m in ("edge", "cloud")}
    assert all(len(v) == 1 for v in by_model.values()), by_model
    assert by_model["edge"] != by_model["cloud"]


def test_gpt_fast_newest_commit_fails_with_its_line(demo):
    res = run(demo, "gpt_fast_head.py:decode", SAMPLING, CLIPS[0])
    assert not res["ok"]
    assert "gpt_fast_head.py" in res["error"] and "speculative_decode" in res["error"]
    assert "same number of dimensions" in res["error"]


def test_generate_inside_a_loop_and_no_cache_verifier_is_followed(demo):
    """edge.generate() per round (a fresh cache each call) and a cache-free cloud forward over
    the whole sequence: a correct loop, no error finding, rounds rebuilt, the cloud's output."""
    fn, path = load_function(f"{ROOT}/tests/fixtures/generate_loop_decoder.py:decode")
    for clip in CLIPS:
        res = record_clip(fn, path, demo, clip, GREEDY, reference=True)
        assert res["ok"], res.get("error")
        assert not [f for f in res["findings"] if f["severity"] == "error"], res["findings"]
        assert res["reference"]["matches"]
        tr = res["trace"]
        assert {t["source"] for t in tr["tokens"]} <= {"accepted", "corrected", "bonus"}
        assert len(tr["rounds"]) >= len(res["token_ids"]) // (GREEDY["k"] + 1)
