"""The Recorder on EAGLE's official loop (issue 41; examples/decoders/eagle_official/, adapted from
SafeAILab/EAGLE): the head fed `input_ids[:, 1:]` (one position behind our layout) and the
verifier called as `base_model.model(...)` + `base_model.lm_head(...)`. The correct loops get no
error and their inner verifier calls are counted; each twin gets its code; a verifier whose
logits the recorder cannot see is said as `not_judged`."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import DynamicCache

from specdec_core.api import load_backend, run_clip
from specdec_core.decoding.config import DecodeConfig
from specdec_core.recorder.driver.clip import load_function, record_clip

ROOT = Path(__file__).resolve().parents[1]
EAGLE = ROOT / "examples" / "decoders" / "eagle_official"
CLIP = str(ROOT / "sample_audio" / "sad_01.wav")
GREEDY = {"k": 4, "max_new_tokens": 128, "temperature": 0.0, "verify": "greedy", "prompt_type": "detailed"}
LOOPS = ("correct", "correct_toplevel", "correct_edge", "no_copy_down", "slot_features", "eagle_stop")


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


@pytest.fixture(scope="module")
def runs(demo):
    out = {}
    for name in LOOPS:
        fn, path = load_function(f"{EAGLE / name}.py:decode")
        out[name] = record_clip(fn, path, demo, CLIP, dict(GREEDY))
        assert out[name]["ok"], out[name].get("error")
    return out


@pytest.fixture(scope="module")
def cloud_only(demo):
    cfg = DecodeConfig(k=4, max_new_tokens=128, prompt_type="detailed")
    return run_clip(demo, CLIP, cfg, baseline=True)["baseline"]["token_ids"]


def by_code(res):
    return {f["code"]: f for f in res["findings"]}


@pytest.mark.parametrize("name", ["correct", "correct_toplevel", "correct_edge"])
def test_correct_eagle_loops_are_lossless_and_get_no_false_finding(runs, cloud_only, name):
    res = runs[name]
    assert res["token_ids"][:len(cloud_only)] == cloud_only
    found = by_code(res)
    assert [f for f in res["findings"] if f["severity"] == "error"] == [], res["findings"]
    # the shift by one and the verifier's parts were the whole cause of the old false findings
    assert not {"context_mismatch", "audio_missing", "draft_context", "loop_overhead",
                "stale_features", "not_judged"} & set(found), res["findings"]
    rec = res["recording"]
    heads = [f for f in rec["forwards"] if f.get("module") == "head"]
    assert all(f["features"].get("shift") == 1 for f in heads)
    assert not heads or max(f["features"]["checked"] for f in heads) > len(rec["prompt_ids"])
    # rounds rebuilt from the counted cloud calls: every token accepted, corrected or bonus
    assert {t["source"] for t in res["trace"]["tokens"]} <= {"accepted", "corrected", "bonus"}


def test_inner_verifier_calls_are_counted_as_cloud_forwards(runs):
    parts = runs["correct"]["recording"]["forwards"]
    top = runs["correct_toplevel"]["recording"]["forwards"]
    inner = [f for f in parts if f["model"] == "cloud"]
    assert inner and all(f.get("call") == "parts" and f["rows"] for f in inner)
    # the same calls, the same rows as the top-level forward gives
    outer = [f for f in top if f["model"] == "cloud"]
    assert [f["ids"] for f in inner] == [f["ids"] for f in outer]
    assert [f["rows"]["argmax"] for f in inner] == [f["rows"]["argmax"] for f in outer]
    assert runs["correct"]["time_split"]["cloud_s"] > 0


def test_kv_not_copied_down_is_stale_cache(runs):
    assert by_code(runs["no_copy_down"])["stale_cache"]["severity"] == "error"


def test_head_fed_the_first_tree_slots_is_stale_features(runs, cloud_only):
    res = runs["slot_features"]
    assert res["token_ids"][:len(cloud_only)] == cloud_only          # lossless
    f = by_code(res)["stale_features"]
    assert f["evidence"]["other_slots"] > 0 and "other tree slots" in f["cause"]
    assert [f for f in res["findings"] if f["severity"] == "error"] == [], res["findings"]


def test_eagle_own_stop_is_missed_eos_as_a_root(runs):
    res = runs["eagle_stop"]
    f = by_code(res)["missed_eos"]
    assert f["severity"] == "error" and f["explained_by"] is None
    stops = set(res["recording"]["stop_ids"])
    i = next(i for i, t in enumerate(res["token_ids"]) if t in stops)
    assert i < len(res["token_ids"]) - 1            # ids follow the stop id
    assert [g["code"] for g in res["findings"] if g["severity"] == "error"] == ["missed_eos"]


def decode_blind(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    """A cloud-only greedy loop whose logits come from its inner model's hidden states times the
    head's weight (F.linear): the recorder sees the cloud's forwards but none of its logits."""
    seq, cache, x = input_ids[0].tolist(), DynamicCache(), input_ids
    n = len(seq)
    with torch.no_grad():
        while len(seq) - n < max_new_tokens:
            h = cloud.model(input_ids=x, past_key_values=cache).last_hidden_state
            seq.append(int(torch.nn.functional.linear(h[0, -1], cloud.lm_head.weight).argmax()))
            if seq[-1] in stop_ids:
                break
            x = torch.tensor([[seq[-1]]])
    return seq[n:]


def test_cloud_forwards_without_visible_logits_are_not_judged(demo):
    res = record_clip(decode_blind, Path(__file__), demo, CLIP, {**GREEDY, "max_new_tokens": 6})
    found = by_code(res)
    f = found["not_judged"]
    assert f["severity"] == "warning" and f["evidence"]["count"] == f["evidence"]["total"] == 6
    assert "unverified_end" not in found and "lossless_violation" not in found


def decode_last_row(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    """The same loop read out through the cloud's own LM head on the last row only."""
    seq, cache, x = input_ids[0].tolist(), DynamicCache(), input_ids
    n = len(seq)
    with torch.no_grad():
        while len(seq) - n < max_new_tokens:
            h = cloud.model(input_ids=x, past_key_values=cache).last_hidden_state
            seq.append(int(cloud.lm_head(h[:, -1]).argmax()))
            if seq[-1] in stop_ids:
                break
            x = torch.tensor([[seq[-1]]])
    return seq[n:]


def test_an_lm_head_on_the_last_row_gives_that_row(demo):
    res = record_clip(decode_last_row, Path(__file__), demo, CLIP, {**GREEDY, "max_new_tokens": 6})
    cloud = [f for f in res["recording"]["forwards"] if f["model"] == "cloud"]
    assert len(cloud) == 6 and all(f.get("call") == "parts" for f in cloud)
    assert [len(f["rows"]["argmax"]) for f in cloud] == [1] * 6
    assert [f for f in res["findings"] if f["code"] == "not_judged" or f["severity"] == "error"] == []
