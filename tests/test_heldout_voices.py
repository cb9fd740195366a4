"""Does the demo pipeline listen beyond its own samples? (issue 14)

sample_audio/unheard/ holds one clip per emotion in espeak-ng voices, sentences and speeds that
were NOT used to calibrate prosody.py (the calibration set is the 18 shipped samples, in three
other voices). These tests score the whole chain on them: prosody bins -> the demo cloud's
description (greedy, classic speculative decoding, so exactly the cloud's own output).
"""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from specdec_core import api
from specdec_core.audio import conditions as C
from specdec_core.audio import prosody
from specdec_core.audio.loading import load_audio
from specdec_core.backends import load_backend
from specdec_core.decoding.config import DecodeConfig
from devtools import demo_corpus as corpus
from specdec_core.evaluation.batch.scoring import emotion_of_text
from sample_script import load_make_samples

ROOT = Path(__file__).resolve().parents[1]
UNHEARD = ROOT / "sample_audio" / "unheard"


def rows() -> list[dict]:
    with open(UNHEARD / "manifest.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))



def test_heldout_voices_and_sentences_are_not_the_calibration_ones():
    ms = load_make_samples()
    calib_voices = {c.voice for c in ms.CLIPS}
    calib_text = "".join(p for c in ms.CLIPS for p in c.phrases)
    assert {r["label"] for r in rows()} == set(C.LABELS)
    assert [c.name for c in ms.HELDOUT] == [r["name"] for r in rows()]
    for clip in ms.HELDOUT:
        assert clip.voice not in calib_voices, clip.name
        assert all(p not in calib_text for p in clip.phrases), clip.name
    assert len({c.voice for c in ms.HELDOUT}) == 6


@pytest.fixture(scope="module")
def measured():
    return {r["name"]: prosody.extract(load_audio(UNHEARD / r["path"])) for r in rows()}


def test_prosody_alone_names_the_emotion_of_unheard_voices(measured):
    said = {r["name"]: corpus.label_for(measured[r["name"]].bins) for r in rows()}
    right = sum(said[r["name"]] == r["label"] for r in rows())
    aroused = sum(corpus.AROUSAL[said[r["name"]]] == corpus.AROUSAL[r["label"]] for r in rows())
    assert right >= 4, said
    assert aroused >= 5, said


@pytest.fixture(scope="module")
def described():
    backend = load_backend("demo")
    cfg = DecodeConfig(max_new_tokens=96)
    out = {}
    for r in rows():
        res = api.run_clip(backend, str(UNHEARD / r["path"]), cfg)
        assert res["ok"], res
        out[r["name"]] = res["text"]
    return out


def test_the_demo_pair_describes_unheard_voices_with_the_right_emotion(described):
    named = {n: emotion_of_text(t) for n, t in described.items()}
    truth = {r["name"]: r["label"] for r in rows()}
    right = sum(named[n] == truth[n] for n in truth)
    aroused = sum(named[n] is not None and corpus.AROUSAL[named[n]] == corpus.AROUSAL[truth[n]]
                  for n in truth)
    assert right >= 4, (named, described)
    assert aroused >= 5, (named, described)


def test_cue_words_agree_with_the_measured_bins(measured, described):
    for name, text in described.items():
        hits = corpus.cue_hits(text)
        assert hits, (name, text)                      # a description states some cues...
        bins = measured[name].bins
        wrong = [(f, b, p) for f, b, p in hits if bins[f] != b]
        assert not wrong, (name, bins, text)           # ...and only the ones that were measured
