"""`python -m specdec_core record` as a user runs it: JSON shape, a decoder that raises, bad
paths (exit codes as for `run`)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLIP = str(ROOT / "sample_audio" / "angry_01.wav")
CORRECT = str(ROOT / "examples" / "decoders" / "correct.py")


def cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "specdec_core", "record", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_record_writes_results_with_trace_recording_and_reference(tmp_path):
    out = tmp_path / "rec.json"
    p = cli(f"{CORRECT}:decode", CLIP, "--set", "k=3", "--reference", "--out", str(out))
    assert p.returncode == 0, p.stderr
    d = json.loads(out.read_text(encoding="utf-8"))
    assert d["backend"] == "demo" and len(d["results"]) == 1
    assert d["pooled_findings"] == []          # pooled checks need two clips or more
    r = d["results"][0]
    assert {"audio", "ok", "text", "token_ids", "findings", "trace", "recording"} <= set(r)
    assert r["ok"] and r["findings"] == [] and r["text"]
    assert r["recording"]["schema"] == "specscope.recording/1"
    assert r["recording"]["declared"]["k"] == 3
    assert max(rd["drafted"] for rd in r["trace"]["rounds"]) == 3
    assert r["reference"]["matches"] and r["reference"]["token_ids"] == r["token_ids"]


def test_reference_reports_the_first_divergence(tmp_path):
    out = tmp_path / "rec.json"
    bad = str(ROOT / "examples" / "decoders" / "lenient_rank.py")
    p = cli(f"{bad}:decode", CLIP, "--reference", "--out", str(out))
    assert p.returncode == 0, p.stderr
    ref = json.loads(out.read_text(encoding="utf-8"))["results"][0]["reference"]
    div = ref["first_divergence"]
    assert not ref["matches"] and div["user"]["id"] != div["reference"]["id"] and div["round"] >= 1


def test_a_decoder_that_raises_is_ok_false_with_one_line(tmp_path):
    (tmp_path / "helper_mod.py").write_text("def step():\n    raise RuntimeError('boom in helper')\n")
    (tmp_path / "mine.py").write_text(
        "import helper_mod\n\ndef decode(edge, cloud, tok, ids, k=4, max_new_tokens=8, stop_ids=()):\n"
        "    edge(ids)\n    helper_mod.step()\n")
    p = cli(f"{tmp_path / 'mine.py'}:decode", CLIP, "--out", "-")
    assert p.returncode == 1
    r = json.loads(p.stdout)["results"][0]
    assert r["ok"] is False and "\n" not in r["error"]
    assert "RuntimeError: boom in helper" in r["error"] and "helper_mod.py:2 in step" in r["error"]
    assert r["recording"]["forwards"][0]["model"] == "edge"


@pytest.mark.parametrize("out", [None, "-", "FILE"])
def test_json_only_with_out_as_run_does(capsys, tmp_path, out):
    """Issue 50.7's rule for `record` too: without --out only the human summary (stderr); --out
    FILE writes the JSON there; --out - prints it on stdout."""
    from specdec_core.cli import main

    path = tmp_path / "rec.json"
    argv = [CORRECT, CLIP, "--set", "max_new_tokens=12"] + ([] if out is None else
                                                           ["--out", "-" if out == "-" else str(path)])
    assert main(["record", *argv]) == 0
    got = capsys.readouterr()
    assert "angry_01.wav: recorded; no error finding" in got.err
    if out is None:
        assert got.out == "" and not path.exists() and "(no JSON written: --out FILE, or --out -" in got.err
    else:
        text = got.out if out == "-" else path.read_text(encoding="utf-8")
        assert (got.out == "") == (out == "FILE") and "no JSON written" not in got.err
        d = json.loads(text)
        assert d["results"][0]["ok"] and d["declared"]["max_new_tokens"] == 12


def test_bad_file_or_function_is_a_usage_error(tmp_path):
    # (FILE.py alone is FILE.py:decode: tests/test_recorder_omni.py records that way)
    for target in (f"{tmp_path / 'nope.py'}:decode", f"{CORRECT}:nope", f"{tmp_path / 'notes.txt'}"):
        p = cli(target, CLIP)
        assert p.returncode == 2, (target, p.stderr)
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
