"""Issue 56: loop families the recorder had not seen (examples/decoders/families/), each a correct
loop and a realistic bug, recorded on one short clip of the demo pair. Correct loops: no error;
bugs: their expected code; rounds, acceptance and colours rebuilt from what ran (rounds = verify
forwards, accepted <= drafted, the coloured tokens add up to the output)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specdec_core.api import load_backend
from specdec_core.recorder.driver.clip import load_function, pooled_findings, record_clip

ROOT = Path(__file__).resolve().parents[1]
FAM = ROOT / "examples" / "decoders" / "families"
CLIP = str(ROOT / "sample_audio" / "heldout2" / "happy_alicia.wav")
GREEDY = {"k": 4, "max_new_tokens": 48, "temperature": 0.0, "verify": "greedy", "prompt_type": "detailed"}
SAMPLING = {**GREEDY, "temperature": 0.8, "verify": "sampling"}

# file -> (declared knobs, the top-level error codes expected: set() = clean, drafter)
EXPECTED = {
    "pipelined_correct.py": (GREEDY, set(), "model"),
    "pipelined_stale_block.py": (GREEDY, {"stale_draft_context"}, "model"),
    "cascade_correct.py": (GREEDY, set(), "model"),
    "cascade_unseen_correction.py": (GREEDY, {"lossless_violation"}, "model"),
    "early_exit_correct.py": (GREEDY, set(), "self"),
    "early_exit_stale_shallow.py": (GREEDY, {"stale_cache"}, "self"),
    "logits_to_keep_correct.py": (GREEDY, set(), "model"),
    "logits_to_keep_short.py": (GREEDY, {"verify_rows_misaligned"}, "model"),
    "top8_link_correct.py": ({**SAMPLING, "target_top_k": 8}, set(), "model"),
    "generating_leviathan.py": (SAMPLING, set(), "model"),
}


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def rec(demo, name, knobs):
    fn, path = load_function(str(FAM / name))
    torch.manual_seed(0)
    res = record_clip(fn, path, demo, CLIP, knobs)
    assert res["ok"], res.get("error")
    return res


def top_errors(res) -> set:
    return {f["code"] for f in res["findings"] if f["severity"] == "error" and not f.get("explained_by")}


def verify_forwards(res) -> int:
    """Cloud forwards that ran every layer and scored a row past the prompt."""
    r = res["recording"]
    full, P = r["layers"]["cloud"], len(r["prompt_ids"])
    return sum(f["model"] == "cloud" and f.get("depth") in (None, full) and f.get("rows") is not None
               and (f.get("cache_len") or 0) + len(f["ids"]) > P for f in r["forwards"])


def identities(res, rounds_are_forwards=True) -> None:
    tr = res["trace"]
    verified = [r for r in tr["rounds"] if r["verified"]]
    if rounds_are_forwards:
        assert len(verified) == verify_forwards(res), (len(verified), verify_forwards(res))
    assert all(r["accepted"] <= r["drafted"] for r in verified)
    m = tr["metrics"]
    assert m["accepted_tokens"] <= sum(r["drafted"] for r in verified)
    counts = {}
    for t in tr["tokens"]:
        counts[t["source"]] = counts.get(t["source"], 0) + 1
    assert sum(counts.values()) == len(res["token_ids"]) == len(tr["tokens"])
    assert counts.get("draft", 0) == 0 or not verified     # no draft-only tokens between verifies
    assert counts.get("accepted", 0) == m["accepted_tokens"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_family(demo, name):
    knobs, expected, drafter = EXPECTED[name]
    res = rec(demo, name, knobs)
    assert top_errors(res) == expected, [(f["code"], f["severity"], f["title"]) for f in res["findings"]]
    assert res["recording"]["drafter"] == drafter
    # a never-cropped drafter cache and a block drafted in an earlier round (pipelined) included;
    # a generating verifier's rounds are its runs
    identities(res, "generating" not in name)
    codes = {f["code"] for f in res["findings"]}
    if not expected:
        assert not codes & {"stale_draft_context", "unexplained_draft", "verify_rows_misaligned"}
    if name == "pipelined_stale_block.py":       # named as what it is, nothing borrowed
        assert not codes & {"hidden_draft_processing", "unexplained_draft"}, codes
        ev = next(f for f in res["findings"] if f["code"] == "stale_draft_context")["evidence"]
        assert ev["forward"] < ev["verify_forward"] and ev["context_held"] != ev["context_verified"]
    if name == "cascade_unseen_correction.py":   # what the evidence shows, not a borrowed cause
        f = next(f for f in res["findings"] if f["code"] == "lossless_violation")
        assert f["evidence"]["named"] == "edge_correction_unjudged", (f["title"], f["cause"])
        assert "edge forward" in f["cause"] and "first draft" not in f["title"] + f["cause"]
    if name == "logits_to_keep_short.py":        # the slot offset, on every verify
        ev = next(f for f in res["findings"] if f["code"] == "verify_rows_misaligned")["evidence"]
        assert ev["slot_offset"] == 1 and ev["rows"] == ev["drafts"]
        assert ev["n_off"] == ev["n_verifies"] == verify_forwards(res)
        assert "hidden_draft_processing" not in codes


def test_generating_lossy_rule_caught_twin_clean(demo):
    """Issue 56 point 3: a generating verifier at T = 0.8 whose rule keeps judging drafts after
    accepting one the cloud did not generate (top-N, p read after the cloud's own tokens) is an
    error, pooled over clips; its exact twin (Leviathan's rule, the round ends there) is clean."""
    clips = [str(ROOT / "sample_audio" / "heldout2" / c) for c in ("angry_m4.wav", "happy_alicia.wav", "angry_m3.wav")]
    for name, lossy in (("generating_top_n.py", True), ("generating_leviathan.py", False)):
        fn, path = load_function(str(FAM / name))
        results = []
        for clip in clips:
            torch.manual_seed(0)
            res = record_clip(fn, path, demo, clip, SAMPLING)
            assert res["ok"], res.get("error")
            results.append(res)
        pooled = pooled_findings(results)
        errors = {f["code"] for f in pooled if f["severity"] == "error"}
        if lossy:
            assert "acceptance_rule" in errors, [(f["code"], f["title"]) for f in pooled]
            f = next(f for f in pooled if f["code"] == "acceptance_rule")
            assert f["evidence"]["n_off_context"] >= 2 and f["evidence"]["position"] is not None
            assert any("acceptance_rule" in top_errors(r) for r in results)
        else:
            assert not errors, [(f["code"], f["title"]) for f in pooled]
            assert all(not top_errors(r) for r in results)
