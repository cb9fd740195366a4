"""Audio front end: anything a user can hand us -> 16 kHz mono float32, or one clear AudioError.
Every later stage assumes clean 16 kHz mono float32 in [-1, 1], so all validation happens here."""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly

from specdec_core.errors import AudioError

TARGET_SR = 16000
MIN_SECONDS = 0.3
MAX_CHANNELS = 8
# -60 dBFS RMS: below this nothing in the clip can carry prosody, so features would be noise.
SILENCE_RMS = 1e-3

AudioSource = Union[str, Path, bytes, bytearray, tuple]


@dataclass
class Audio:
    samples: np.ndarray          # float32, mono, TARGET_SR
    sr: int = TARGET_SR
    duration: float = 0.0        # seconds
    source_sr: int = TARGET_SR
    channels: int = 1            # channels in the source, before the down-mix
    warnings: list[str] = field(default_factory=list)
    silent: bool = False
    name: str = "audio"
    speaker: object = None       # audio.speakers.SpeakerStats of the clip's speaker, if known


def load_audio(src: AudioSource, max_seconds: float = 60.0) -> Audio:
    """Read a path, raw bytes or a Gradio-style (sample_rate, array) tuple."""
    data, sr, name, notes = _read(src, max_seconds)
    audio = _clean(data, sr, name, max_seconds)
    audio.warnings[:0] = notes
    return audio


def _read(src: AudioSource, max_seconds: float) -> tuple[np.ndarray, int, str, list[str]]:
    if isinstance(src, tuple):
        if len(src) != 2:
            raise AudioError("audio tuple must be (sample_rate, samples)")
        sr, arr = src
        return _array_from_tuple(arr), _check_sr(sr, "audio array"), "audio array", []
    if isinstance(src, (bytes, bytearray)):
        name = "uploaded bytes"
        if len(src) == 0:
            raise AudioError(f"empty audio file: {name}")
        return _sf_read(io.BytesIO(bytes(src)), name, max_seconds, _truncation(bytes(src[:65536]), len(src)))
    if isinstance(src, (str, Path)):
        path = Path(src)
        name = path.name or str(path)
        if not path.exists():
            raise AudioError(f"audio file not found: {path}")
        if path.is_dir():
            raise AudioError(f"not an audio file: {name} (it is a folder)")
        if path.stat().st_size == 0:
            raise AudioError(f"empty audio file: {name}")
        with open(path, "rb") as f:
            head = f.read(65536)
        return _sf_read(path, name, max_seconds, _truncation(head, path.stat().st_size))
    raise AudioError(f"unsupported audio input of type {type(src).__name__}")


def _truncation(head: bytes, total: int) -> tuple[float, float] | None:
    """(declared, present) seconds of a RIFF/WAVE file whose data chunk was cut off, else None.
    libsndfile silently reads what is there, so a cut-off upload would look merely short."""
    if len(head) < 12 or head[:4] not in (b"RIFF", b"RIFX") or head[8:12] != b"WAVE":
        return None
    order = "<" if head[:4] == b"RIFF" else ">"
    pos, rate, align = 12, 0, 0
    while pos + 8 <= len(head):
        cid, size = head[pos:pos + 4], struct.unpack(order + "I", head[pos + 4:pos + 8])[0]
        if cid == b"fmt " and pos + 22 <= len(head):
            rate = struct.unpack(order + "I", head[pos + 12:pos + 16])[0]
            align = struct.unpack(order + "H", head[pos + 20:pos + 22])[0]
        if cid == b"data":
            present = max(0, total - (pos + 8))
            # streaming writers leave 0 or 0xFFFFFFFF when they cannot seek back: unknown, not cut
            if size in (0, 0xFFFFFFFF) or size <= present or not rate or not align:
                return None
            return size / align / rate, present // align / rate
        pos += 8 + size + (size & 1)
    return None


def _sf_read(f, name: str, max_seconds: float, cut=None) -> tuple[np.ndarray, int, str, list[str]]:
    said = cut and f"truncated WAV: {name} holds {cut[1]:.2f} s of the {cut[0]:.2f} s its header declares"
    try:
        with sf.SoundFile(f) as snd:
            sr, channels, frames = snd.samplerate, snd.channels, snd.frames
            # Refuse oversized inputs from the header, before decoding an hour of audio.
            _check_shape(name, channels, frames / sr if sr else 0.0, max_seconds)
            # always_2d keeps the channel count visible even for mono files.
            data = snd.read(dtype="float32", always_2d=True)
    except AudioError:
        raise
    except Exception:
        if cut:
            raise AudioError(said + " (the file was cut off; upload it again)") from None
        raise AudioError(f"not an audio file: {name} (soundfile could not read it)") from None
    notes = []
    if cut:
        if cut[1] < MIN_SECONDS:
            raise AudioError(said + f" (the file was cut off; at least {MIN_SECONDS} s are needed)")
        notes.append(said + "; decoding what is there")
    return data, _check_sr(sr, name), name, notes


def _check_shape(name: str, channels: int, duration: float, max_seconds: float) -> None:
    if channels > MAX_CHANNELS:
        raise AudioError(f"too many channels in {name}: {channels} (at most {MAX_CHANNELS})")
    if duration > max_seconds:
        raise AudioError(f"clip too long: {name} is {duration:.1f} s (maximum {max_seconds:g} s)")


def _check_sr(sr, name: str) -> int:
    try:
        sr_int = int(sr)
    except (TypeError, ValueError):
        raise AudioError(f"bad sample rate for {name}: {sr!r}") from None
    if sr_int <= 0 or sr_int != sr:
        raise AudioError(f"bad sample rate for {name}: {sr!r}")
    return sr_int


def _array_from_tuple(arr) -> np.ndarray:
    a = np.asarray(arr)
    if a.dtype.kind not in "iuf":
        raise AudioError(f"audio array has unsupported dtype {a.dtype}")
    if a.ndim == 1:
        a = a[:, None]
    elif a.ndim != 2:
        raise AudioError(f"audio array must be [n] or [n, channels], got shape {a.shape}")
    elif a.shape[0] <= MAX_CHANNELS < a.shape[1]:
        # Gradio gives [n, ch]; a [ch, n] array would otherwise look like thousands of channels.
        a = a.T
    if a.dtype.kind in "iu":
        info = np.iinfo(a.dtype)
        # Unsigned PCM is centred on its midpoint; signed PCM on zero.
        mid = (int(info.max) + int(info.min) + 1) / 2
        scale = (int(info.max) - int(info.min) + 1) / 2
        return ((a.astype(np.float64) - mid) / scale).astype(np.float32)
    return a.astype(np.float32)


def _clean(data: np.ndarray, sr: int, name: str, max_seconds: float) -> Audio:
    n, channels = data.shape
    duration = n / sr
    _check_shape(name, channels, duration, max_seconds)
    if n == 0 or channels == 0:
        raise AudioError(f"no audio samples in {name}")
    if not np.isfinite(data).all():
        raise AudioError(f"invalid samples in {name}: contains NaN or infinite values")
    if duration < MIN_SECONDS:
        raise AudioError(f"clip too short: {name} is {duration:.2f} s (minimum {MIN_SECONDS} s)")

    warnings: list[str] = []
    mono = data.mean(axis=1, dtype=np.float64)
    peak = float(np.max(np.abs(mono)))
    if peak > 1.0:
        mono = mono / peak
        warnings.append(f"samples exceeded [-1, 1] (peak {peak:.2f}); peak-normalised")
    if sr != TARGET_SR:
        mono = resample_poly(mono, TARGET_SR, sr)      # scipy reduces the ratio by its gcd
        # The anti-alias filter can overshoot a full-scale input slightly; not the user's fault.
        overshoot = float(np.max(np.abs(mono)))
        if overshoot > 1.0:
            mono = mono / overshoot
    samples = mono.astype(np.float32)

    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
    silent = rms < SILENCE_RMS
    if silent:
        warnings.append(f"clip is silent or nearly silent (RMS {rms:.1e}); prosody features are meaningless")
    return Audio(samples=samples, sr=TARGET_SR, duration=len(samples) / TARGET_SR,
                 source_sr=sr, channels=channels, warnings=warnings, silent=silent, name=name)
