"""Per-speaker normalisation of the prosody features: with a manifest's `speaker` column, each
feature is z-normalised over the speaker's clips and mapped onto the calibration clips'
distribution (only centred with 2-3 clips; one clip is read on its own). docs/listening.md,
"Speaker-relative pitch and speaker normalisation"."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Mean and std of each feature over the 18 calibration clips (single-clip reading);
# tests/test_speakers.py recomputes them from the clips.
CALIBRATION = {"pitch": (3.81, 3.79), "pvar": (2.04, 1.54), "energy": (-20.49, 5.77),
               "rate": (5.34, 1.52), "pause": (0.078, 0.088)}
# The speaker-independent measurement (prosody.measure) behind each feature.
RAW = {"pitch": "f0_st", "pvar": "pvar", "energy": "energy", "rate": "rate", "pause": "pause"}
VOICED = ("pitch", "pvar")      # averaged over the speaker's voiced clips only
MIN_CLIPS = 2                   # fewer: no normalisation
MIN_CLIPS_STD = 4               # fewer: centre only
MIN_STD_SHARE = 0.5             # a speaker's std is floored at this share of the calibration std


@dataclass(frozen=True)
class SpeakerStats:
    speaker: str
    n: int
    mean: dict
    std: dict | None            # None: centred only (fewer than MIN_CLIPS_STD clips)


def stats(speaker: str, raws: list[dict]) -> SpeakerStats | None:
    """Statistics of one speaker's clips (prosody.measure outputs); None if too few clips."""
    if len(raws) < MIN_CLIPS:
        return None
    mean, std = {}, {}
    for feat, key in RAW.items():
        xs = np.array([r[key] for r in raws if feat not in VOICED or r["f0_hz"] > 0], dtype=float)
        if xs.size < MIN_CLIPS:
            return None
        mean[feat] = float(xs.mean())
        std[feat] = max(float(xs.std()), MIN_STD_SHARE * CALIBRATION[feat][1])
    return SpeakerStats(speaker, len(raws), mean, std if len(raws) >= MIN_CLIPS_STD else None)


def normalise(raw: dict, st: SpeakerStats) -> dict:
    """The clip's feature values relative to its speaker, on the calibration scale."""
    out = dict(raw)
    for feat, key in RAW.items():
        cal_mean, cal_sd = CALIBRATION[feat]
        d = raw[key] - st.mean[feat]
        out[feat] = cal_mean + (cal_sd * d / st.std[feat] if st.std else d)
    return out


def describe(st: SpeakerStats) -> str:
    how = "z-normalised" if st.std else "centred (fewer than %d clips: no std)" % MIN_CLIPS_STD
    return (f"features {how} per speaker: {st.speaker!r}, {st.n} clips, mean median F0 "
            f"{27.5 * 2 ** (st.mean['pitch'] / 12):.0f} Hz")

