"""Per-speaker normalisation (issue 21): a manifest's `speaker` column makes each clip's prosody
relative to that speaker's clips; without it (or with one clip) the register is estimated."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from specdec_core import api
from specdec_core.audio import conditions as C
from specdec_core.audio import prosody, speakers
from specdec_core.audio.loading import load_audio
from specdec_core.backends import load_backend
from specdec_core.decoding.config import DecodeConfig
from specdec_core.evaluation.batch.run import iter_batch
from specdec_core.evaluation.batch.manifest import read_manifest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_audio"


def calibration_rows() -> list[dict]:
    with open(SAMPLES / "manifest.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_calibration_statistics_are_those_of_the_calibration_clips():
    vals = [prosody.extract(load_audio(SAMPLES / r["path"])).values for r in calibration_rows()]
    for feat, (mean, sd) in speakers.CALIBRATION.items():
        xs = np.array([v[feat] for v in vals])
        assert xs.mean() == pytest.approx(mean, abs=0.02 + 0.01 * abs(mean)), feat
        assert xs.std() == pytest.approx(sd, rel=0.02, abs=0.005), feat


def fake(f0_st, energy, rate=5.0, pause=0.05, pvar=1.5):
    return {"f0_st": f0_st, "f0_hz": 27.5 * 2 ** (f0_st / 12), "pvar": pvar, "energy": energy,
            "rate": rate, "pause": pause}


def test_z_normalisation_reads_each_clip_relative_to_its_speaker():
    # Two speakers, the same four relative deviations, a 12 semitone and 10 dB offset.
    lows = [fake(20 + d, -25 + e) for d, e in ((-2, -4), (0, 0), (2, 4), (4, 8))]
    highs = [fake(32 + d, -15 + e) for d, e in ((-2, -4), (0, 0), (2, 4), (4, 8))]
    a, b = speakers.stats("a", lows), speakers.stats("b", highs)
    assert a.std is not None and b.std is not None            # >= MIN_CLIPS_STD clips: z
    for lo, hi in zip(lows, highs):
        na, nb = speakers.normalise(lo, a), speakers.normalise(hi, b)
        for feat in C.FEATURES:
            assert na[feat] == pytest.approx(nb[feat]), feat
    # The speaker's mean lands on the calibration mean, its spread on the calibration spread.
    normed = np.array([speakers.normalise(r, a)["energy"] for r in lows])
    assert normed.mean() == pytest.approx(speakers.CALIBRATION["energy"][0])
    assert normed.std() == pytest.approx(speakers.CALIBRATION["energy"][1])


def test_few_clips_are_centred_only_and_one_clip_is_not_normalised():
    two = speakers.stats("s", [fake(20, -25), fake(22, -21)])
    assert two.std is None
    n = speakers.normalise(fake(22, -21), two)
    assert n["energy"] == pytest.approx(speakers.CALIBRATION["energy"][0] + 2.0)
    assert n["pitch"] == pytest.approx(speakers.CALIBRATION["pitch"][0] + 1.0)
    assert speakers.stats("s", [fake(20, -25)]) is None


def test_speaker_normalisation_changes_what_a_clip_reads():
    # neutral_02 is a female voice at rest; among clips of the same voice that are all louder
    # and higher, it reads low and quiet for that speaker.
    path = SAMPLES / "neutral_02.wav"
    alone = prosody.extract(load_audio(path))
    assert alone.normalisation == "clip" and "register" in alone.note
    raw = prosody.measure(load_audio(path))
    louder = [dict(raw, energy=raw["energy"] + k, f0_st=raw["f0_st"] + k) for k in (6, 8, 10)]
    st = speakers.stats("f2", [raw] + louder)
    rel = prosody.extract(load_audio(path), speaker=st)
    assert rel.normalisation == "speaker" and "'f2', 4 clips" in rel.note
    assert (alone.bins["energy"], alone.bins["pitch"]) == ("mid", "mid")
    assert (rel.bins["energy"], rel.bins["pitch"]) == ("low", "low")


def test_manifest_speaker_column_reaches_the_prompt_panel(tmp_path):
    clips = [r for r in calibration_rows() if r["name"].endswith("_02")]   # one voice: cmn+f2
    lines = ["name,path,label,prompt_type,reference,speaker"]
    lines += [f"{r['name']},{SAMPLES / r['path']},{r['label']},concise,,f2" for r in clips]
    lines.append(f"other,{SAMPLES / 'angry_01.wav'},angry,concise,,")
    (tmp_path / "m.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    read = read_manifest(tmp_path / "m.csv")
    assert {c.speaker for c in read} == {"f2", None} and all(c.extra == {} for c in read)
    res = list(iter_batch(load_backend("demo"), read, {"A": DecodeConfig(max_new_tokens=8)}))[-1]["result"]
    info = {r["name"]: r["trace"]["info"] for r in res.rows}
    for r in clips:
        assert info[r["name"]]["prosody_normalisation"] == "speaker", r["name"]
        assert "6 clips" in info[r["name"]]["prosody_note"]
    assert info["other"]["prosody_normalisation"] == "clip"
    # The same voice's six emotions, normalised together, still read six different ways.
    assert len({tuple(info[r["name"]]["bins"].values()) for r in clips}) == 6
    from components.status import prompt_info_md
    assert "**Speaker normalisation:** per speaker" in prompt_info_md(info["neutral_02"])
    assert "**Speaker normalisation:** none, single clip" in prompt_info_md(info["other"])


def test_single_clip_run_says_which_normalisation_was_used():
    backend = load_backend("demo")
    p = api.prepare(backend, str(SAMPLES / "happy_01.wav"), DecodeConfig())
    assert p.info["prosody_normalisation"] == "clip"
    assert "P(low voice)" in p.info["prosody_note"]


def test_batch_dir_applies_speaker_normalisation_like_the_batch_tab(tmp_path):
    """The CLI's batch (evaluation/scale.run_batch_dir, both engines) reads a speaker's clips
    relative to that speaker, as the Batch tab's iter_batch does."""
    from specdec_core.evaluation.batch.scale import run_batch_dir

    clips = [r for r in calibration_rows() if r["name"].endswith("_02")][:4]
    lines = ["name,path,label,prompt_type,reference,speaker"]
    lines += [f"{r['name']},{SAMPLES / r['path']},{r['label']},concise,,f2" for r in clips]
    (tmp_path / "m.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    read = read_manifest(tmp_path / "m.csv")
    cfg = {"A": DecodeConfig(max_new_tokens=8)}
    res, ran = run_batch_dir({"backend": "demo"}, read, cfg, tmp_path / "out")
    tab = list(iter_batch(load_backend("demo"), read, cfg))[-1]["result"]
    assert ran == len(clips)
    for a, b in zip(res.rows, tab.rows):
        assert a["trace"]["info"]["prosody_normalisation"] == "speaker", a["name"]
        assert a["trace"]["info"]["bins"] == b["trace"]["info"]["bins"]
        assert a["text"] == b["text"]
