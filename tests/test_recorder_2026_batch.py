"""Issue 48, items 2-3: batch rows REORDERED between steps (engines condense batches; vllm #14645,
#45100) are followed by their content, not their slot: the loop that moves every row one slot
over each step (examples/decoders/field/reordered_rows.py) gets no error, greedy (each clip's
row is its greedy decode) or sampling; its twin that leaves the per-row counts in the old order
(reordered_rows_stale_counts.py) gets its contexts named wrong on every run.

Issue 48, item 4: a ragged batch whose rollback ZEROES the rejected key/value tail instead of
masking it (mlx-vlm #1962 / #2113). The masked loop (examples/decoders/field/ragged_masked.py)
gets no error and each clip's row is its greedy decode; its twin (ragged_zeroed.py) is named
`zeroed_kv` on every clip, the cache as the root, and the positions it makes look wrong
(position_error) are its symptom, never the root. Greedy only (the loop has no sampling)."""
from __future__ import annotations

import copy
import functools
from pathlib import Path

import pytest

from specdec_core.api import load_backend
from specdec_core.recorder import load_function, record_clip
from specdec_core.recorder.analyze import analyze


def top_level(found: list, severity: str = "error") -> list:
    """The findings of `severity` no root cause explains (what the report leads with)."""
    return [f for f in found if f["severity"] == severity and not f.get("explained_by")]


ROOT = Path(__file__).resolve().parents[1]
FIELD = ROOT / "examples" / "decoders" / "field"
CLIPS = [str(ROOT / "sample_audio" / f"{c}.wav") for c in ("angry_01", "happy_02")]
GREEDY = {"k": 4, "max_new_tokens": 24, "temperature": 0.0, "verify": "greedy", "prompt_type": "detailed"}
SAMPLING = {**GREEDY, "temperature": 0.8, "verify": "sampling"}
ROWS = [(CLIPS[0], 0), (CLIPS[1], 2)]        # (clip, the slot its prompt starts in)


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def record(demo, name, reference=False):
    fn, path = load_function(str(FIELD / name))
    out = [record_clip(fn, path, demo, c, GREEDY, reference=reference) for c in CLIPS]
    assert all(r["ok"] for r in out), [r.get("error") for r in out]
    return out


def test_masked_ragged_rollback_gets_no_error(demo):
    for res in record(demo, "ragged_masked.py", reference=True):
        assert [f["code"] for f in res["findings"] if f["severity"] == "error"] == [], res["findings"]
        assert res["reference"]["matches"], res["reference"]["first_divergence"]
        assert any(f["code"] == "batch_rows" for f in res["findings"])
        fw = res["recording"]["forwards"]
        assert not any(r.get("zeroed") for f in fw for r in f.get("batch_rows") or [])


def test_zeroed_tail_is_named_as_the_cache_not_the_positions(demo):
    for res in record(demo, "ragged_zeroed.py"):
        roots = top_level(res["findings"])
        assert roots and {f["code"] for f in roots} == {"zeroed_kv"}, res["findings"]
        z = next(f for f in roots if "(the clip)" in f["title"])
        assert z["evidence"]["slots"] and z["evidence"]["max_slots"] >= 1
        assert "mask" in z["fix"] and "crop" in z["fix"]
        for f in res["findings"]:
            if f["code"] == "position_error":
                assert f["explained_by"] == "zeroed_kv"



def record_rows(demo, name, knobs=GREEDY, reference=False):
    fn, path = load_function(str(FIELD / name))
    out = [record_clip(functools.partial(fn, row=row), path, demo, c, knobs, reference=reference, seed=row)
           for c, row in ROWS]
    assert all(r["ok"] for r in out), [r.get("error") for r in out]
    return out


def errors(res):
    return [(f["code"], f["title"]) for f in res["findings"] if f["severity"] == "error"]


@pytest.fixture(scope="module")
def reordered(demo):
    return record_rows(demo, "reordered_rows.py", reference=True)


def test_rows_reordered_between_steps_are_followed_by_their_content(reordered):
    for res in reordered:
        assert errors(res) == [], res["findings"]
        assert res["reference"]["matches"], res["reference"]["first_divergence"]
        fw = res["recording"]["forwards"]
        assert any("from" in r for f in fw for r in f.get("batch_rows") or [])   # rows moved
        rounds = res["trace"]["rounds"]                   # and the clip's row was judged
        assert len(rounds) > 2 and sum(r["accepted"] for r in rounds) > len(rounds)


def test_followed_by_slot_the_same_recording_is_wrong(reordered, demo):
    """Without the content tracking (rows read by slot) the correct loop's rows mix: the
    tracking is what makes it clean."""
    rec = copy.deepcopy(reordered[0]["recording"])
    for f in rec["forwards"]:
        for r in f.get("batch_rows") or []:
            r.pop("from", None)
    _, found = analyze(rec, demo.tokenizer)
    assert any(f["severity"] == "error" for f in found), found


def test_reordered_rows_sampling_gets_no_error(demo):
    for res in record_rows(demo, "reordered_rows.py", SAMPLING):
        assert errors(res) == [], res["findings"]
        assert len(res["trace"]["rounds"]) > 2


def test_counts_left_in_the_old_order_are_named_on_every_run(demo):
    for res in record_rows(demo, "reordered_rows_stale_counts.py"):
        codes = {c for c, _ in errors(res)}
        assert codes & {"stale_cache", "context_mismatch", "lossless_violation"}, res["findings"]
        assert all(t.startswith("row ") and " of 3" in t for _, t in errors(res))
