"""The shipped sample clips: manifest format, audio format, and that they sound like their label."""
from __future__ import annotations

import csv
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from devtools import demo_corpus
from specdec_core.audio import conditions

from specdec_core.audio import prosody
from specdec_core.audio.loading import load_audio
from sample_script import load_make_samples

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_audio"
MANIFEST = SAMPLES / "manifest.csv"


def rows() -> list[dict]:
    with open(MANIFEST, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_manifest_header_and_fields():
    with open(MANIFEST, encoding="utf-8") as f:
        assert f.readline().strip() == "name,path,label,prompt_type,reference"
    rs = rows()
    assert len(rs) >= 12
    assert len({r["name"] for r in rs}) == len(rs)
    for r in rs:
        assert r["label"] in conditions.LABELS
        assert r["prompt_type"] in conditions.PROMPT_TYPES
        assert not Path(r["path"]).is_absolute()
    counts = Counter(r["label"] for r in rs)
    assert all(counts[lab] >= 2 for lab in conditions.LABELS), counts
    types = Counter(r["prompt_type"] for r in rs)
    assert types["detailed"] > types["concise"] > 0


def test_references_are_mer_style():
    for r in rows():
        ref = r["reference"]
        lo, hi = conditions.LENGTH_BANDS[r["prompt_type"]]
        n = len(re.findall(r"[\u4e00-\u9fff]", ref))
        assert lo <= n <= hi, (r["name"], n)
        assert ref.endswith("。")
        hits = [(lab, w) for lab, ws in conditions.EMOTION_WORDS.items() for w in ws if w in ref]
        assert [lab for lab, _ in hits] == [r["label"]], (r["name"], hits)
        # Information first: the emotion word comes after the acoustic cues.
        assert ref.index(hits[0][1]) > len(ref) // 3, r["name"]


def test_clips_are_16k_mono_2_to_8_seconds_and_small():
    total = 0
    for r in rows():
        p = SAMPLES / r["path"]
        info = sf.info(p)
        assert (info.samplerate, info.channels) == (16000, 1), r["name"]
        assert 2.0 <= info.duration <= 8.0, (r["name"], info.duration)
        a = load_audio(p)
        assert a.warnings == [] and not a.silent
        total += p.stat().st_size
    assert total < 3 * 1024 * 1024


@pytest.mark.parametrize("row", rows(), ids=lambda r: r["name"])
def test_clip_bins_match_its_label_profile(row):
    bins = prosody.extract(load_audio(SAMPLES / row["path"])).bins
    profile = demo_corpus.PROFILES[row["label"]]
    agree = sum(bins[f] == profile[f] for f in conditions.FEATURES)
    assert agree >= 4, f"{row['name']}: {bins} vs {profile}"
    assert demo_corpus.label_for(bins) == row["label"], (row["name"], bins)


def test_each_label_is_spoken_by_three_voices():
    ms = load_make_samples()
    voices = {}
    for clip in ms.CLIPS:
        voices.setdefault(clip.label, set()).add(clip.voice)
    assert all(len(v) >= 3 for v in voices.values()), voices
    assert len({c.speed for c in ms.CLIPS}) >= 3          # and at several speeds



def test_labels_are_separable_from_bins():
    # The demo model names the emotion from the bins: clips of different labels must not all
    # collapse onto one token sequence.
    seqs = {}
    for r in rows():
        b = prosody.extract(load_audio(SAMPLES / r["path"])).bins
        seqs.setdefault(tuple(b[f] for f in conditions.FEATURES), set()).add(r["label"])
    assert all(len(labels) == 1 for labels in seqs.values()), seqs


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_script_reproduces_shipped_clips():
    ms = load_make_samples()
    assert [c.name for c in ms.CLIPS] == [r["name"] for r in rows()]
    if ms.espeak_version() != ms.ESPEAK_VERSION:
        pytest.skip(f"espeak-ng {ms.espeak_version()} is not the build the clips were made with")
    first_per_label = {c.label: c for c in reversed(ms.CLIPS)}
    for clip in first_per_label.values():
        pcm = np.clip(np.round(ms.synthesise(clip) * 32767.0), -32768, 32767).astype(np.int16)
        shipped, _ = sf.read(SAMPLES / f"{clip.name}.wav", dtype="int16")
        np.testing.assert_array_equal(pcm, shipped, err_msg=clip.name)
