"""Gates on real demo runs: each changes what it should and nothing else.

The edge alone with the mask_1x1 fault loops ("音调有些变化，音调有些变化，…", garbled openings),
and with the draft_penalties fault it stutters ("嗓门、嗓门"), which gives the gates something
to fight; with cloud verification on, gates only shape the drafts and the
committed text stays the cloud's."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from specdec_core import DecodeConfig
from specdec_core.api import load_backend, run_clip

CLIPS = sorted(str(p) for p in (Path(__file__).resolve().parents[1] / "sample_audio").glob("*_01.wav"))
EDGE_BROKEN = {"entropy_threshold": "inf", "faults": ["mask_1x1"]}
PUNCT = "，。、：:；！？,.!?;"


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def texts_metrics(demo, **kw):
    return [run_clip(demo, c, DecodeConfig.from_dict({**EDGE_BROKEN, **kw})) for c in CLIPS]


def chars_before(text: str, marks: str) -> list[int]:
    """For each mark in `marks`, the number of hanzi since the previous punctuation."""
    out, run = [], 0
    for ch in text:
        if ch in PUNCT:
            if ch in marks:
                out.append(run)
            run = 0
        elif re.match(r"[\u4e00-\u9fff]", ch):
            run += 1
    return out


@pytest.fixture(scope="module")
def broken(demo):
    return texts_metrics(demo)


# The one-layer edge with mask_1x1 loops on whole phrases rather than stuttering on one
# character; the seed-000 B draft penalties make it stutter ("嗓门、嗓门", 70 adjacent repeats
# on the six clips), which is what the adjacent-repeat ban is for.
EDGE_STUTTER = {"entropy_threshold": "inf", "faults": ["draft_penalties"]}


def test_ban_adjacent_repeat(demo):
    runs = [run_clip(demo, c, DecodeConfig.from_dict(EDGE_STUTTER)) for c in CLIPS]
    assert sum(r["metrics"]["adjacent_repeats"] for r in runs) >= 10
    gated = [run_clip(demo, c, DecodeConfig.from_dict({**EDGE_STUTTER, "ban_adjacent_repeat": True}))
             for c in CLIPS]
    assert all(r["metrics"]["adjacent_repeats"] == 0 for r in gated)


def test_no_repeat_ngram(demo, broken):
    assert sum(r["metrics"]["repeat_rate_3"] for r in broken) > 1.0
    gated = texts_metrics(demo, no_repeat_ngram=3)
    assert all(r["metrics"]["repeat_rate_3"] == 0 for r in gated)


def test_comma_and_period_gates(demo, broken):
    assert min(x for r in broken for x in chars_before(r["text"], "，、：:,")) < 4
    gated = texts_metrics(demo, comma_gate=4, period_gate=8)
    for r in gated:
        assert all(n >= 4 for n in chars_before(r["text"], "，、：:,")), r["text"]
        assert all(n >= 8 for n in chars_before(r["text"], "。")), r["text"]


def test_repetition_penalty_lowers_repeats(demo, broken):
    gated = texts_metrics(demo, repetition_penalty=1.5)
    before = sum(r["metrics"]["repeat_rate"] for r in broken)
    assert sum(r["metrics"]["repeat_rate"] for r in gated) < 0.7 * before


def test_gates_do_not_change_verified_output(demo):
    cfg = DecodeConfig(comma_gate=4, period_gate=8, ban_adjacent_repeat=True, no_repeat_ngram=3,
                       repetition_penalty=1.3)
    for c in CLIPS[:3]:
        r = run_clip(demo, c, cfg, baseline=True)
        assert r["metrics"]["matches_baseline"], r["audio"]
