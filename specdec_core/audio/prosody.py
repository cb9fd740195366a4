"""Prosody features measured with Praat (praat-parselmouth) -> bins -> condition tokens.
The bin thresholds are the calibrated meaning of the condition tokens the demo models were
trained on; pitch is speaker-relative (audio/speakers.py, or low_register_probability for a
single clip). Why Praat, the measurements and the calibration: docs/listening.md."""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import parselmouth
from parselmouth.praat import call
from scipy.signal import find_peaks

from specdec_core.audio import conditions, speakers
from specdec_core.audio.loading import Audio, load_audio
from specdec_core.errors import UserError

HOP_S = 0.010                 # analysis step of the pitch and intensity contours
F0_MIN, F0_MAX = 60.0, 600.0  # Praat pitch floor / ceiling (covers espeak-ng's bass voices)
OCTAVE_SLIP_ST = 10.0         # F0 frames this far from the median are tracking errors
INTENSITY_MIN_PITCH = 100.0   # Praat's default for silence detection (32 ms window)
SILENCE_DB = -30.0            # below the clip's loudest frame: silence (Praat's threshold)
MIN_PAUSE_S = 0.12            # shorter silences are stop closures / syllable gaps
MIN_SOUNDING_S = 0.05
UTTERANCE_GAP_S = 1.0         # longer silences separate utterances: not hesitation
NUCLEUS_DIP_DB = 6.0          # syllable nuclei: intensity peaks this prominent...
NUCLEUS_MIN_GAP_S = 0.07      # ...and at least this far apart
DBFS_OFFSET = 93.979          # Praat intensity is dB re 2e-5 Pa of a signal in Pa: 20*log10(1/2e-5)

# Single-clip register: resting pitch = the F0 floor (FLOOR_PCT-th percentile) lowered by
# RANGE_SHARE of the median-floor interval, soft split around REGISTER_SPLIT_HZ (logistic,
# REGISTER_WIDTH_ST wide); docs/listening.md, "A single clip".
FLOOR_PCT = 5
RANGE_SHARE = 0.5
REGISTER_SPLIT_HZ = 105.0
REGISTER_WIDTH_ST = 1.0
VOICE_REF_HZ = {"low": 84.0, "high": 160.0}

# (low/mid edge, mid/high edge) for each feature, in its own unit.
THRESHOLDS = {
    "pitch": (-1.5, 3.0),       # semitones of the median F0 above the voice's reference
    "pvar": (0.8, 2.5),         # semitones, std of F0 around the median
    "energy": (-24.0, -17.0),   # dBFS, mean power of the sounding parts
    "rate": (4.7, 6.6),         # intensity nuclei per second of speaking time
    "pause": (0.07, 0.18),      # share of the speaking span spent in pauses
}
UNITS = {"pitch": "st", "pvar": "st", "energy": "dBFS", "rate": "/s", "pause": ""}


@dataclass
class Prosody:
    values: dict[str, float]
    bins: dict[str, str]
    normalisation: str = "clip"          # "clip" (register estimate) or "speaker"
    note: str = ""                       # how pitch was made speaker-relative, for the UI


def measure(audio: Audio) -> dict[str, float]:
    """Praat's measurements of one clip: F0 statistics (Hz, semitones), energy, rate, pause."""
    snd = parselmouth.Sound(np.asarray(audio.samples, dtype=np.float64), sampling_frequency=audio.sr)
    sounding = _sounding(snd)
    inten = snd.to_intensity(minimum_pitch=INTENSITY_MIN_PITCH, time_step=HOP_S, subtract_mean=False)
    db, t = inten.values[0] - DBFS_OFFSET, inten.xs()
    inside = _within(t, sounding)
    out = {"energy": float(10.0 * np.log10(np.mean(10.0 ** (db[inside] / 10.0)))) if inside.any()
           else float(db.max(initial=-120.0))}
    speaking = sum(e - s for s, e in sounding)
    span = sum(e - s for s, e in _utterances(sounding))
    out["pause"] = float((span - speaking) / span) if span > 0 else 0.0
    peaks, _ = find_peaks(db, prominence=NUCLEUS_DIP_DB, distance=max(1, round(NUCLEUS_MIN_GAP_S / HOP_S)))
    out["rate"] = float(np.count_nonzero(inside[peaks]) / speaking) if speaking > 0 else 0.0

    f0 = snd.to_pitch_ac(time_step=HOP_S, pitch_floor=F0_MIN, pitch_ceiling=F0_MAX).selected_array["frequency"]
    f0 = f0[f0 > 0]
    if f0.size >= 3:
        med = float(np.median(f0))
        f0 = f0[np.abs(12.0 * np.log2(f0 / med)) < OCTAVE_SLIP_ST]
        out.update(f0_hz=med, f0_floor_hz=float(np.percentile(f0, FLOOR_PCT)),
                   pvar=float(np.std(12.0 * np.log2(f0 / med))), f0_st=_st(med))
    else:
        out.update(f0_hz=0.0, f0_floor_hz=0.0, pvar=0.0, f0_st=0.0)
    return out


def extract(audio: Audio, speaker: speakers.SpeakerStats | None = None) -> Prosody:
    """Features and bins of one clip. With the statistics of the clip's speaker (the argument,
    else audio.speaker) they are normalised per speaker; else pitch is relative to the clip's
    estimated voice register."""
    raw = measure(audio)
    speaker = speaker if speaker is not None else audio.speaker
    if speaker is not None:
        values = speakers.normalise(raw, speaker)
        norm, note = "speaker", speakers.describe(speaker)
    else:
        values = dict(raw)
        p_low = low_register_probability(raw["f0_hz"], raw["f0_floor_hz"])
        ref = reference_hz(p_low)
        values.update(pitch=12.0 * np.log2(raw["f0_hz"] / ref) if raw["f0_hz"] else 0.0,
                      p_low=p_low, ref_hz=ref)
        norm = "clip"
        note = (f"pitch relative to this clip's estimated voice register: median F0 "
                f"{raw['f0_hz']:.0f} Hz, floor {raw['f0_floor_hz']:.0f} Hz, P(low voice) {p_low:.2f}, "
                f"reference {ref:.0f} Hz" if raw["f0_hz"] else "no voiced frames: pitch not measured")
    bins = bin_values(values)
    if not raw["f0_hz"]:
        bins["pitch"], bins["pvar"] = "mid", "flat"  # nothing voiced: no evidence either way
    return Prosody(values, bins, norm, note)   # values keep the raw measurements too


def speaker_stats(items) -> dict[str, speakers.SpeakerStats]:
    """{speaker: statistics} for (speaker, audio source) pairs, e.g. a manifest's rows. A source
    that cannot be read is left out here (its clip fails on its own when decoded); speakers
    with too few clips get no entry (their clips are read on their own)."""
    raws: dict[str, list[dict]] = {}
    for speaker, src in items:
        if not speaker:
            continue
        try:
            audio = load_audio(src)
        except UserError:
            continue
        if not audio.silent:
            raws.setdefault(speaker, []).append(measure(audio))
    out = {name: speakers.stats(name, rs) for name, rs in raws.items()}
    return {name: st for name, st in out.items() if st is not None}


def low_register_probability(median_hz: float, floor_hz: float) -> float:
    """P(low, typically male, voice) from the clip's F0 distribution (0.5 when unvoiced)."""
    if not median_hz or not floor_hz:
        return 0.5
    # the voice's resting pitch: the floor, lowered by RANGE_SHARE of the range between floor
    # and median (aroused speech raises the median well above its floor)
    z = _st(floor_hz * (floor_hz / median_hz) ** RANGE_SHARE) - _st(REGISTER_SPLIT_HZ)
    return float(1.0 / (1.0 + np.exp(z / REGISTER_WIDTH_ST)))


def reference_hz(p_low: float) -> float:
    lo, hi = VOICE_REF_HZ["low"], VOICE_REF_HZ["high"]
    return float(np.exp(p_low * np.log(lo) + (1.0 - p_low) * np.log(hi)))


def bin_values(values: dict[str, float]) -> dict[str, str]:
    out = {}
    for feat, names in conditions.FEATURES.items():
        lo, hi = THRESHOLDS[feat]
        v = values[feat]
        out[feat] = names[0] if v < lo else names[2] if v >= hi else names[1]
    return out


def describe(p: Prosody, note: bool = True) -> str:
    """One line for logs and the UI: 'pitch=+6.2st(high) pvar=3.1st(wide) ...', with `note`
    followed by how the features were made speaker-relative."""
    parts = []
    for feat in conditions.FEATURES:
        v = p.values[feat]
        num = f"{v:+.1f}" if feat == "pitch" else f"{v:.2f}" if feat == "pause" else f"{v:.1f}"
        parts.append(f"{feat}={num}{UNITS[feat]}({p.bins[feat]})")
    return " ".join(parts) + (f" ({p.note})" if note and p.note else "")


def _st(hz: float) -> float:
    """Semitones above 27.5 Hz (eGeMAPS' F0 scale)."""
    return 12.0 * np.log2(hz / 27.5) if hz > 0 else 0.0


def _sounding(snd: parselmouth.Sound) -> list[tuple[float, float]]:
    """(start, end) of the sounding intervals, from Praat's silence detector."""
    with warnings.catch_warnings():   # "loudest and softest part differ by only 0 dB": silence
        warnings.simplefilter("ignore", parselmouth.PraatWarning)
        tg = call(snd, "To TextGrid (silences)", INTENSITY_MIN_PITCH, HOP_S, SILENCE_DB,
                  MIN_PAUSE_S, MIN_SOUNDING_S, "silent", "sounding")
    out = []
    for i in range(1, call(tg, "Get number of intervals", 1) + 1):
        if call(tg, "Get label of interval", 1, i) == "sounding":
            out.append((call(tg, "Get start time of interval", 1, i),
                        call(tg, "Get end time of interval", 1, i)))
    return out


def _utterances(sounding: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sounding intervals merged across pauses shorter than UTTERANCE_GAP_S."""
    out: list[list[float]] = []
    for s, e in sounding:
        if out and s - out[-1][1] < UTTERANCE_GAP_S:
            out[-1][1] = e
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _within(t: np.ndarray, intervals: list[tuple[float, float]]) -> np.ndarray:
    mask = np.zeros(t.shape, dtype=bool)
    for s, e in intervals:
        mask |= (t >= s) & (t < e)
    return mask
