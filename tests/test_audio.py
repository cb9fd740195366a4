"""Audio front end: every refusal on a real file, and the conversions on real signals."""
from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from specdec_core.audio.loading import Audio, load_audio
from specdec_core.errors import AudioError, UserError


def tone(seconds: float, sr: int = 16000, freq: float = 220.0, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def refused(src, match: str, **kw) -> str:
    with pytest.raises(AudioError, match=match) as exc:
        load_audio(src, **kw)
    msg = str(exc.value)
    assert "\n" not in msg and msg.strip() == msg
    assert isinstance(exc.value, UserError)
    return msg


# --- refusals --------------------------------------------------------------------------------

def test_text_file_named_wav_is_refused(tmp_path):
    p = tmp_path / "notes.wav"
    p.write_text("this is not audio, just some notes\n" * 20)
    msg = refused(p, "not an audio file")
    assert "notes.wav" in msg


def test_empty_file_is_refused(tmp_path):
    p = tmp_path / "empty.wav"
    p.write_bytes(b"")
    assert "empty.wav" in refused(p, "empty")


def test_missing_file_is_refused(tmp_path):
    refused(tmp_path / "nope.wav", "not found")


def test_non_audio_bytes_are_refused():
    refused(b"\x00\x01garbage bytes that are not a RIFF header" * 10, "not an audio file")
    refused(b"", "empty")


def test_zero_frame_wav_is_refused(tmp_path):
    p = tmp_path / "zero.wav"
    sf.write(p, np.zeros(0, dtype=np.float32), 16000)
    assert p.stat().st_size > 0
    refused(p, "no audio samples")


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_inf_in_float_wav_is_refused(tmp_path, bad):
    x = tone(1.0)
    x[1234] = bad
    p = tmp_path / "bad.wav"
    sf.write(p, x, 16000, subtype="FLOAT")
    refused(p, "NaN or infinite")


def test_too_short_clip_is_refused(tmp_path):
    p = tmp_path / "short.wav"
    sf.write(p, tone(0.1), 16000)
    msg = refused(p, "too short")
    assert "0.10 s" in msg


@pytest.mark.parametrize("keep_bytes", [44, 100, 3000])
def test_cut_off_wav_is_called_truncated_not_short(tmp_path, keep_bytes):
    full = tmp_path / "full.wav"
    sf.write(full, tone(2.0), 16000, subtype="PCM_16")
    cut = tmp_path / "cut.wav"
    cut.write_bytes(full.read_bytes()[:keep_bytes])
    msg = refused(cut, "truncated WAV")
    assert "cut.wav" in msg and "2.00 s its header declares" in msg and "too short" not in msg
    with pytest.raises(AudioError, match="truncated WAV: uploaded bytes"):
        load_audio(cut.read_bytes())


def test_cut_off_wav_with_enough_audio_decodes_with_a_warning(tmp_path):
    full = tmp_path / "full.wav"
    sf.write(full, tone(2.0), 16000, subtype="PCM_16")
    cut = tmp_path / "cut.wav"
    cut.write_bytes(full.read_bytes()[:44 + 2 * 16000])   # the first second
    a = load_audio(cut)
    assert abs(a.duration - 1.0) < 0.01
    assert any("truncated WAV" in w and "1.00 s of the 2.00 s" in w for w in a.warnings)
    # a complete file has no such warning; a genuinely short one is still "too short"
    assert not load_audio(full).warnings
    short = tmp_path / "short.wav"
    sf.write(short, tone(0.1), 16000, subtype="PCM_16")
    refused(short, "too short")


def test_too_long_clip_is_refused_with_configurable_limit(tmp_path):
    p = tmp_path / "long.wav"
    sf.write(p, tone(3.0), 16000)
    refused(p, "too long", max_seconds=2.0)
    assert load_audio(p, max_seconds=5.0).duration == pytest.approx(3.0)


def test_default_limit_is_60_seconds(tmp_path):
    p = tmp_path / "minute.wav"
    sf.write(p, tone(61.0, sr=8000), 8000, subtype="PCM_16")
    refused(p, "maximum 60 s")


def test_more_than_8_channels_is_refused(tmp_path):
    p = tmp_path / "ten.wav"
    sf.write(p, np.tile(tone(0.5)[:, None], (1, 10)), 16000)
    refused(p, "too many channels.*10")


# --- conversions -------------------------------------------------------------------------------

def test_stereo_is_downmixed_by_averaging(tmp_path):
    left = tone(1.0, amp=0.6)
    stereo = np.stack([left, np.zeros_like(left)], axis=1)
    p = tmp_path / "stereo.wav"
    sf.write(p, stereo, 16000, subtype="FLOAT")
    a = load_audio(p)
    assert a.channels == 2 and a.samples.ndim == 1
    assert np.max(np.abs(a.samples)) == pytest.approx(0.3, abs=1e-3)
    assert a.warnings == []


def test_48k_is_resampled_to_16k(tmp_path):
    p = tmp_path / "hi.wav"
    sf.write(p, tone(1.0, sr=48000, freq=440.0), 48000, subtype="PCM_16")
    a = load_audio(p)
    assert (a.sr, a.source_sr) == (16000, 48000)
    assert len(a.samples) == 16000 and a.duration == pytest.approx(1.0)
    assert a.samples.dtype == np.float32
    spectrum = np.abs(np.fft.rfft(a.samples))
    assert np.argmax(spectrum) * 16000 / len(a.samples) == pytest.approx(440.0, abs=2.0)


def test_flac_and_ogg_are_read(tmp_path):
    for ext in ("flac", "ogg"):
        p = tmp_path / f"x.{ext}"
        sf.write(p, tone(1.0, sr=22050), 22050)
        a = load_audio(p)
        assert a.sr == 16000 and a.duration == pytest.approx(1.0, abs=0.01)


def test_bytes_input_matches_path_input(tmp_path):
    p = tmp_path / "b.wav"
    sf.write(p, tone(0.8), 16000, subtype="PCM_16")
    from_bytes = load_audio(p.read_bytes())
    from_path = load_audio(p)
    np.testing.assert_array_equal(from_bytes.samples, from_path.samples)


def test_int16_tuple_as_gradio_gives_it():
    x = (tone(1.0, sr=44100, amp=0.5) * 32767).astype(np.int16)
    a = load_audio((44100, np.stack([x, x], axis=1)))
    assert isinstance(a, Audio)
    assert (a.sr, a.source_sr, a.channels) == (16000, 44100, 2)
    assert a.samples.dtype == np.float32
    assert np.max(np.abs(a.samples)) == pytest.approx(0.5, abs=0.01)
    mono = load_audio((16000, (tone(1.0) * 32767).astype(np.int16)))
    assert mono.channels == 1 and np.max(np.abs(mono.samples)) == pytest.approx(0.5, abs=0.01)


def test_out_of_range_floats_are_peak_normalised_with_warning(tmp_path):
    p = tmp_path / "hot.wav"
    sf.write(p, tone(1.0, amp=2.5), 16000, subtype="FLOAT")
    a = load_audio(p)
    assert np.max(np.abs(a.samples)) == pytest.approx(1.0, abs=1e-4)
    assert len(a.warnings) == 1 and "peak-normalised" in a.warnings[0]
    assert not a.silent


def test_silence_is_allowed_but_flagged(tmp_path):
    p = tmp_path / "quiet.wav"
    sf.write(p, np.zeros(16000, dtype=np.float32), 16000)
    a = load_audio(p)
    assert a.silent and any("silent" in w for w in a.warnings)
    loud = load_audio((16000, tone(1.0)))
    assert not loud.silent and loud.warnings == []
