"""Bundled samples and export files (ui/common.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from specdec_core.errors import AudioError
from ui import common


def test_unheard_clips_are_listed_after_the_samples_and_open_by_default():
    names = common.sample_names()
    unheard = [n for n in names if n.startswith("unheard/")]
    assert len(unheard) == 6 and names[:18] == [n for n in names if "/" not in n]
    assert common.DEFAULT_SAMPLE in unheard
    labels = dict((v, k) for k, v in common.sample_choices())
    # short enough for the dropdown box; no prompt type (that is the user's choice)
    assert labels[common.DEFAULT_SAMPLE] == "unheard/angry_f3 · angry"
    assert not any("detailed" in k or "concise" in k for k in labels.values())
    assert common.manifest_size() == 18
    assert common.sample_path(common.DEFAULT_SAMPLE).parent.name == "unheard"
    assert next(r for r in common.sample_rows() if r["name"] == common.DEFAULT_SAMPLE)["prompt_type"] == "detailed"


@pytest.mark.parametrize("bad", ["../sample_audio/angry_01", "unheard/../../README", "/etc/passwd"])
def test_sample_names_never_reach_outside_the_samples(bad):
    with pytest.raises(AudioError, match="unknown sample"):
        common.sample_path(bad)


@pytest.mark.parametrize("stem", ["trace-unheard/angry_f3", "trace-../../x", "trace-说话 人?*"])
def test_exports_stay_in_the_export_folder(stem, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "_OUT", tmp_path)
    path = Path(common.write_json(stem, {"ok": True}))
    assert path.parent == tmp_path and path.is_file()
    d = common.export_dir(stem)
    assert d.parent == tmp_path and d.is_dir()


def test_a_non_audio_upload_is_refused_with_one_line(tmp_path):
    bad = tmp_path / "notes.wav"
    bad.write_text("not audio at all", encoding="utf-8")
    msg = common.check_upload(str(bad))
    assert msg and "\n" not in msg and "Traceback" not in msg
    assert common.check_upload(str(common.sample_path("angry_01"))) is None


def test_the_first_run_waits_for_the_warm_up_instead_of_decoding_beside_it():
    """Issue 50 (6): app.py starts a warm-up thread with the page; a Run pressed meanwhile used to
    decode beside it on the same cores (16-23 s for 53 tokens, then 2 s). The run's backend now
    comes after the warm-up ended, and the warm-up went through the judged decode path."""
    import threading

    from specdec_core import recorder as builtin     # the public API the engine calls through

    decoded = []
    real = builtin.judged_stream

    def spy(*a, **kw):
        decoded.append(threading.current_thread().name)
        yield from real(*a, **kw)

    builtin.judged_stream = spy
    try:
        common.warm_up()
        backend = common.get_backend("demo")           # what a Run handler calls first
        seen = list(decoded)                           # decodes finished or begun by now
    finally:
        builtin.judged_stream = real
    assert backend is not None and common._WARMED.is_set()
    assert seen == ["specscope-warmup"]


def test_served_ab_verdict_names_the_first_difference_and_the_reference_side():
    from ui.served import verdict

    class Chars:     # token id -> one character
        def decode(self, ids):
            return "".join(chr(0x4e00 + i) for i in ids)

    t = Chars()
    assert verdict([1, 2, 3], [1, 2, 3], None, t) == "Same output: A and B give the same 3 tokens."
    line = verdict([1, 2, 3], [1, 2, 4], [1, 2, 4], t)
    assert line.startswith("A and B first differ at token 2: ") and line.endswith("B matches it.")
    assert verdict([1, 2], [1, 2, 5], [1, 9], t).endswith(
        "A the end, B '" + t.decode([5]) + "'.")    # the reference is shorter than the difference
    assert "neither matches it" in verdict([7, 1], [7, 2], [7, 3], t)


def test_stop_sets_every_running_block_of_the_session_and_only_while_it_runs():
    """ui/common.running: the Stop button (cancel_session) reaches the Events of the session's
    running blocks, not another session's; a block that ended is set and no longer listed."""
    with common.running("s-stop") as a, common.running("s-stop") as b, common.running("s-other") as c:
        assert common.cancel_session("s-stop") == 2 and a.is_set() and b.is_set() and not c.is_set()
    assert c.is_set() and common.cancel_session("s-stop") == 0 and common.cancel_session("s-other") == 0


def test_an_api_upload_arrives_as_a_path():
    """gr.api hands an uploaded file over as Gradio's FileData dict; the widgets as a str."""
    clip = str(common.sample_path("angry_01"))
    assert common.resolve_audio(None, {"path": clip, "meta": {"_type": "gradio.FileData"}}) == (clip, "angry_01.wav")
    assert common.resolve_audio(None, clip) == (clip, "angry_01.wav")
    with pytest.raises(AudioError, match="no audio given"):
        common.resolve_audio(None, None)
