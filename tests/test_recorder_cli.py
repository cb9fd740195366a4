"""`python -m specdec_core record` as a user runs it: JSON shape, a decoder that raises, bad
paths (exit codes as for `run`)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_many import run_many

ROOT = Path(__file__).resolve().parents[1]
CLIP = str(ROOT / "sample_audio" / "angry_01.wav")
CORRECT = str(ROOT / "examples" / "decoders" / "correct.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The module's `record` command lines in one CLI process (tests/cli_many.py: a process start
    costs more than most of these lines' own work), by name; "dir": their folder."""
    d = tmp_path_factory.mktemp("record")
    (d / "helper_mod.py").write_text("def step():\n    raise RuntimeError('boom in helper')\n")
    (d / "mine.py").write_text(
        "import helper_mod\n\ndef decode(edge, cloud, tok, ids, k=4, max_new_tokens=8, stop_ids=()):\n"
        "    edge(ids)\n    helper_mod.step()\n")
    bad = str(ROOT / "examples" / "decoders" / "lenient_rank.py")
    cases = {"correct": [f"{CORRECT}:decode", CLIP, "--set", "k=3", "--reference", "--out", d / "rec.json"],
             "lenient": [f"{bad}:decode", CLIP, "--reference", "--out", d / "lenient.json"],
             "raises": [f"{d / 'mine.py'}:decode", CLIP, "--out", "-"],
             # (FILE.py alone is FILE.py:decode: tests/test_recorder_omni.py records that way)
             **{f"bad{i}": [target, CLIP] for i, target in enumerate(
                 (f"{d / 'nope.py'}:decode", f"{CORRECT}:nope", f"{d / 'notes.txt'}"))}}
    return dict(zip(cases, run_many([["record", *argv] for argv in cases.values()])), dir=d)


def test_record_writes_results_with_trace_recording_and_reference(runs):
    out = runs["dir"] / "rec.json"
    p = runs["correct"]
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


def test_reference_reports_the_first_divergence(runs):
    out = runs["dir"] / "lenient.json"
    p = runs["lenient"]
    assert p.returncode == 0, p.stderr
    ref = json.loads(out.read_text(encoding="utf-8"))["results"][0]["reference"]
    div = ref["first_divergence"]
    assert not ref["matches"] and div["user"]["id"] != div["reference"]["id"] and div["round"] >= 1


def test_a_decoder_that_raises_is_ok_false_with_one_line(runs):
    p = runs["raises"]
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


def test_bad_file_or_function_is_a_usage_error(runs):
    for i in range(3):
        p = runs[f"bad{i}"]
        assert p.returncode == 2, (p.args, p.stderr)
        assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
