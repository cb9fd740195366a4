"""Issue 41 item 2: batched speculative decoding (examples/decoders/batched/, adapted from
lucidrains/speculative-decoding): three prompts, left padding, per-row acceptance, caches
realigned each step. Every row is judged on its own and findings name their row: the correct
loop gets no error whichever row holds the clip; the twin that realigns every row with row 0's
acceptance gets an error whichever row holds the clip (with the clip in row 0 only the other
rows are wrong). A layout the recorder cannot read is one warning, never a row-0 verdict."""
from __future__ import annotations

import copy
import functools
from pathlib import Path

import pytest

from specdec_core.api import load_backend
from specdec_core.recorder.analyze import analyze
from specdec_core.recorder.driver.clip import load_function, record_clip

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "examples" / "decoders" / "batched"
CLIP = ROOT / "sample_audio" / "angry_01.wav"
KNOBS = {"k": 4, "max_new_tokens": 16, "temperature": 0.0, "verify": "greedy",
         "prompt_type": "detailed"}


@pytest.fixture(scope="module")
def backend():
    return load_backend("demo")


def _record(backend, name, row):
    fn, path = load_function(str(FOLDER / f"{name}.py"))
    res = record_clip(functools.partial(fn, row=row), path, backend, str(CLIP), KNOBS)
    assert res["ok"], res.get("error")
    return res


@pytest.fixture(scope="module")
def correct(backend):
    return {row: _record(backend, "lucidrains_batched", row) for row in (0, 1, 2)}


@pytest.fixture(scope="module")
def twin(backend):
    return {row: _record(backend, "lucidrains_realign_row0", row) for row in (0, 1, 2)}


def errors(res):
    return [(f["code"], f["title"]) for f in res["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("row", [0, 1, 2])
def test_correct_batched_loop_gets_no_error_in_any_row(correct, backend, row):
    res = correct[row]
    assert errors(res) == []
    info = next(f for f in res["findings"] if f["code"] == "batch_rows")
    assert info["evidence"]["row"] == row and info["evidence"]["batch"] == 3
    greedy = backend.cloud.generate(
        __import__("torch").tensor([res["recording"]["prompt_ids"]]), do_sample=False,
        max_new_tokens=KNOBS["max_new_tokens"], eos_token_id=list(backend.stop_ids),
        pad_token_id=0)[0, len(res["recording"]["prompt_ids"]):].tolist()
    assert res["token_ids"] == greedy                     # the clip's row is its greedy decode
    rounds = res["trace"]["rounds"]                       # and it was really judged: rounds
    assert len(rounds) > 2 and sum(r["accepted"] for r in rounds) > len(rounds)


def test_every_forward_is_batched_with_left_padding(correct):
    fw = correct[1]["recording"]["forwards"]
    assert all(f["batch"] == 3 for f in fw)
    pads = {tuple(r["pad"] for r in f["batch_rows"]) for f in fw if f["cache_len"]}
    assert any(len(set(p)) > 1 for p in pads)               # rows padded differently


@pytest.mark.parametrize("row", [0, 1, 2])
def test_realignment_with_row_0_is_an_error_whichever_row_holds_the_clip(twin, row):
    errs = errors(twin[row])
    assert errs, twin[row]["findings"]
    assert {c for c, _ in errs} & {"stale_cache", "context_mismatch", "lossless_violation"}
    others = [t for _, t in errs if not t.startswith("row 0 of 3")]
    assert others and all(t.startswith("row ") and " of 3" in t for _, t in errs)
    if row == 0:                        # the clip's row is right: only the other rows are wrong
        assert not any("(the clip)" in t for _, t in errs)


def test_an_unreadable_layout_is_one_warning_not_a_row_0_verdict(twin, backend):
    rec = copy.deepcopy(twin[1]["recording"])
    for f in rec["forwards"][3:]:
        f["batch_rows"], f["batch_layout"] = None, "attention mask [3, 1, 9, 9]: padding not readable"
    _, found = analyze(rec, backend.tokenizer)
    assert [f["code"] for f in found] == ["batch_layout"]
    assert found[0]["severity"] == "warning"


def test_a_constant_position_origin_per_row_is_not_an_error(correct, backend):
    """Positions counted with the left padding (cache length + i, the padded convention: rotary
    attention sees the same relative distances) are the row's own origin; an origin that moves
    between forwards (keys rotated for other positions than the queries) is a position error."""
    rec = copy.deepcopy(correct[1]["recording"])
    for f in rec["forwards"]:
        for r in f["batch_rows"]:
            r["position_ids"] = [p + 7 for p in r["position_ids"]]
    _, found = analyze(rec, backend.tokenizer)
    assert not [f for f in found if f["severity"] == "error"]
    moved = copy.deepcopy(correct[1]["recording"])
    f = next(f for f in moved["forwards"] if f["model"] == "cloud" and f["i"] > 10)
    f["batch_rows"][2]["position_ids"] = [p + 3 for p in f["batch_rows"][2]["position_ids"]]
    _, found = analyze(moved, backend.tokenizer)
    assert any(x["code"] == "position_error" and x["title"].startswith("row 2 of 3")
               for x in found if x["severity"] == "error"), found
