"""Prosody features from the waveform (numpy/scipy only) -> bins -> condition tokens.

Runs on every decode, so everything is vectorised over frames: a 10 s clip takes a few tens of
milliseconds. The bin thresholds below are calibrated on the espeak-ng clips in sample_audio/
(scripts/make_samples.py) so that each clip lands on its label's conditions.PROFILES entry;
change them together with those clips and tests/test_samples.py.

`rate` counts envelope peaks, not true syllables: espeak-ng's Mandarin voice shows about two
peaks per syllable, so its values read roughly twice a syllable rate. Only the bins matter.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import find_peaks

from specdec_core.audio import conditions
from specdec_core.audio.loading import Audio

HOP_S = 0.010            # analysis hop: 10 ms frames
ENERGY_WIN_S = 0.025     # RMS window
F0_MIN, F0_MAX = 60.0, 500.0
YIN_WIN_S = 0.025        # YIN integration window
YIN_THRESHOLD = 0.2      # first CMNDF dip below this is the period (de Cheveigne & Kawahara)
VOICED_MAX_CMNDF = 0.35  # frames whose best dip is above this are treated as unvoiced
OCTAVE_SLIP_ST = 10.0

# A frame is active (speech) if it is within ACTIVE_RANGE_DB of the loud frames and above an
# absolute floor; relative so that quiet but clean recordings still segment.
ACTIVE_RANGE_DB = 30.0
ACTIVE_FLOOR_DB = -55.0
# Silent runs shorter than this are stop closures / syllable gaps, not pauses.
MIN_PAUSE_S = 0.12
# Syllable nuclei: envelope peaks this prominent (dB), at least this far apart.
PEAK_PROMINENCE_DB = 6.0
PEAK_MIN_GAP_S = 0.07
ENVELOPE_SMOOTH_S = 0.03

# Speaker-relative pitch. The floor of a voice's F0 (FLOOR_PCT-th percentile of voiced frames)
# moves much less with emotion than its median does, so it tells a low voice (typically male)
# from a high one (typically female); the pitch feature is the median F0 in semitones above the
# reference of that register. A very low female or a very high male voice can be put in the
# wrong register: conditions.LABEL_WEIGHTS counts pitch least for that reason.
FLOOR_PCT = 5
REGISTER_SPLIT_HZ = 105.0
VOICE_REF_HZ = {"low": 84.0, "high": 160.0}

# (low/mid edge, mid/high edge) for each feature, in its own unit.
THRESHOLDS = {
    "pitch": (-1.5, 3.0),       # semitones of the median F0 above the voice register's reference
    "pvar": (0.8, 2.5),        # semitones, std of F0 around the median
    "energy": (-24.0, -17.0),  # dBFS, RMS of active frames
    "rate": (4.5, 6.7),        # envelope peaks per second of speech (pauses excluded)
    "pause": (0.07, 0.18),     # fraction of the active span spent in pauses
}
UNITS = {"pitch": "st", "pvar": "st", "energy": "dBFS", "rate": "pk/s", "pause": ""}


@dataclass
class Prosody:
    values: dict[str, float]
    bins: dict[str, str]


def extract(audio: Audio) -> Prosody:
    x = np.asarray(audio.samples, dtype=np.float32)
    sr = int(audio.sr)
    hop = int(round(HOP_S * sr))

    db = _frame_db(x, sr, hop)
    active = _active_frames(db)
    idx = np.flatnonzero(active)
    if idx.size == 0:
        values = {"pitch": 0.0, "pvar": 0.0, "f0_hz": 0.0, "f0_floor_hz": 0.0, "energy": float(db.max(initial=-120.0)),
                  "rate": 0.0, "pause": 0.0}
        return Prosody(values, bin_values(values))

    first, last = idx[0], idx[-1]
    span = active[first:last + 1]
    pause_mask = _long_runs(~span, int(round(MIN_PAUSE_S / HOP_S)))
    speech_frames = int(span.size - pause_mask.sum())

    power = 10.0 ** (db[active] / 10.0)
    energy = 10.0 * np.log10(np.mean(power))

    f0 = _f0_track(x, sr, hop, active)
    if f0.size >= 3:
        f0_hz = float(np.median(f0))
        st = 12.0 * np.log2(f0 / f0_hz)
        # Frames more than OCTAVE_SLIP_ST away are tracking errors (octave jumps), not prosody.
        keep = np.abs(st) < OCTAVE_SLIP_ST
        st, f0 = st[keep], f0[keep]
        pvar = float(np.std(st))
        floor = float(np.percentile(f0, FLOOR_PCT))
        pitch = 12.0 * np.log2(f0_hz / VOICE_REF_HZ[register_of(floor)])
    else:
        f0_hz, floor, pitch, pvar = 0.0, 0.0, 0.0, 0.0

    peaks = _syllable_peaks(db, active, hop, sr)
    rate = peaks / max(speech_frames * HOP_S, 1e-6)
    pause = float(pause_mask.sum() / span.size)

    values = {"pitch": pitch, "pvar": pvar, "energy": float(energy),
              "rate": float(rate), "pause": pause, "f0_hz": f0_hz, "f0_floor_hz": floor}
    bins = bin_values(values)
    if f0_hz == 0.0:
        bins["pitch"], bins["pvar"] = "mid", "flat"  # nothing voiced: no evidence either way
    return Prosody(values, bins)


def register_of(floor_hz: float) -> str:
    """'low' or 'high' voice register from the F0 floor (Hz)."""
    return "low" if floor_hz < REGISTER_SPLIT_HZ else "high"


def bin_values(values: dict[str, float]) -> dict[str, str]:
    out = {}
    for feat, names in conditions.FEATURES.items():
        lo, hi = THRESHOLDS[feat]
        v = values[feat]
        out[feat] = names[0] if v < lo else names[2] if v >= hi else names[1]
    return out


def condition_tokens_for(audio: Audio) -> list[str]:
    return conditions.condition_tokens(extract(audio).bins)


def describe(p: Prosody) -> str:
    """One line for logs and the UI: 'pitch=182Hz(high) pvar=3.1st(wide) ...'."""
    parts = []
    for feat in conditions.FEATURES:
        v = p.values[feat]
        num = f"{v:+.1f}" if feat == "pitch" else f"{v:.2f}" if feat == "pause" else f"{v:.1f}"
        parts.append(f"{feat}={num}{UNITS[feat]}({p.bins[feat]})")
    if p.values.get("f0_hz"):
        reg = register_of(p.values["f0_floor_hz"])
        parts.append(f"(median F0 {p.values['f0_hz']:.0f} Hz, floor {p.values['f0_floor_hz']:.0f} "
                     f"Hz: a {reg}-register voice)")
    return " ".join(parts)


# --- internals ---------------------------------------------------------------------------

def _frames(x: np.ndarray, length: int, hop: int, n_frames: int) -> np.ndarray:
    need = (n_frames - 1) * hop + length
    if x.size < need:
        x = np.pad(x, (0, need - x.size))
    return np.lib.stride_tricks.sliding_window_view(x, length)[::hop][:n_frames]


def _frame_db(x: np.ndarray, sr: int, hop: int) -> np.ndarray:
    win = int(round(ENERGY_WIN_S * sr))
    n = max(1, 1 + (x.size - win) // hop) if x.size >= win else 1
    fr = _frames(x, win, hop, n).astype(np.float64)
    ms = np.mean(fr * fr, axis=1)
    return 10.0 * np.log10(ms + 1e-12)


def _active_frames(db: np.ndarray) -> np.ndarray:
    ref = np.percentile(db, 95)
    return db > max(ref - ACTIVE_RANGE_DB, ACTIVE_FLOOR_DB)


def _long_runs(mask: np.ndarray, min_len: int) -> np.ndarray:
    """Keep only the runs of True that are at least min_len long."""
    out = np.zeros_like(mask)
    padded = np.concatenate(([False], mask, [False]))
    d = np.diff(padded.astype(np.int8))
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    for s, e in zip(starts, ends):
        if e - s >= min_len:
            out[s:e] = True
    return out


def _f0_track(x: np.ndarray, sr: int, hop: int, active: np.ndarray) -> np.ndarray:
    """YIN on the active frames, vectorised: CMNDF from an FFT autocorrelation."""
    w = int(round(YIN_WIN_S * sr))
    max_lag = int(sr / F0_MIN)
    min_lag = int(sr / F0_MAX)
    idx = np.flatnonzero(active)
    if idx.size == 0:
        return np.zeros(0)
    # Energy frames are centred at hop*i + win/2; start the YIN frame at the same place.
    fr = _frames(x, w + max_lag, hop, active.size)[idx].astype(np.float64)
    fr = fr - fr.mean(axis=1, keepdims=True)
    nfft = 1 << int(np.ceil(np.log2(w + max_lag + w)))
    spec_full = np.fft.rfft(fr, nfft)
    spec_win = np.fft.rfft(fr[:, :w], nfft)
    r = np.fft.irfft(spec_full * np.conj(spec_win), nfft)[:, :max_lag + 1]
    sq = np.concatenate([np.zeros((fr.shape[0], 1)), np.cumsum(fr * fr, axis=1)], axis=1)
    lags = np.arange(max_lag + 1)
    e0 = sq[:, w][:, None]
    e_tau = sq[:, lags + w] - sq[:, lags]
    d = np.maximum(e0 + e_tau - 2.0 * r, 0.0)
    cum = np.cumsum(d[:, 1:], axis=1)
    cmndf = np.ones_like(d)
    cmndf[:, 1:] = d[:, 1:] * lags[1:] / np.maximum(cum, 1e-12)

    c = cmndf[:, min_lag:max_lag + 1]
    below = c < YIN_THRESHOLD
    has_dip = below.any(axis=1)
    first = np.where(has_dip, np.argmax(below, axis=1), np.argmin(c, axis=1))
    # Walk from the first dip down to its local minimum.
    rising = np.concatenate([c[:, 1:] >= c[:, :-1], np.ones((c.shape[0], 1), bool)], axis=1)
    cols = np.arange(c.shape[1])[None, :]
    tau_i = np.argmax(rising & (cols >= first[:, None]), axis=1)
    best = c[np.arange(c.shape[0]), tau_i]
    voiced = best < VOICED_MAX_CMNDF

    # Parabolic interpolation for sub-sample lag accuracy.
    rows = np.arange(c.shape[0])
    left = c[rows, np.maximum(tau_i - 1, 0)]
    right = c[rows, np.minimum(tau_i + 1, c.shape[1] - 1)]
    denom = left - 2 * best + right
    shift = np.where(np.abs(denom) > 1e-12, 0.5 * (left - right) / np.where(denom == 0, 1, denom), 0.0)
    tau = tau_i + min_lag + np.clip(shift, -1, 1)
    f0 = sr / tau[voiced]
    return f0[(f0 >= F0_MIN) & (f0 <= F0_MAX)]


def _syllable_peaks(db: np.ndarray, active: np.ndarray, hop: int, sr: int) -> int:
    k = max(1, int(round(ENVELOPE_SMOOTH_S / HOP_S)))
    env = np.convolve(10.0 ** (db / 10.0), np.ones(k) / k, mode="same")
    env_db = 10.0 * np.log10(env + 1e-12)
    peaks, _ = find_peaks(env_db, prominence=PEAK_PROMINENCE_DB,
                          distance=max(1, int(round(PEAK_MIN_GAP_S / HOP_S))))
    return int(np.count_nonzero(active[peaks])) if peaks.size else 0
