"""Issue 43, the own-decoder path from the shell: `record` on a text-only pair (`--backend hf
--prompt`, no audio; the shipped demo models are an hf pair), `--fail-on error|warning` on
`run` and `record` (CI gates), a wrong decoder signature and an exception inside the user's code
in one line naming their file:line, and a recording cut short named incomplete. In-process
through the CLI's own main() (the backends load once per process)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdec_core.cli import main

ROOT = Path(__file__).resolve().parents[1]
CLIP = str(ROOT / "sample_audio" / "angry_01.wav")
DEC = ROOT / "examples" / "decoders"
MODELS = ROOT / "specdec_core" / "demo" / "models"
HF = ["--backend", "hf", "--edge-model", str(MODELS / "edge"), "--cloud-model", str(MODELS / "cloud"),
      "--prompt", "说话人语速较快"]


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    return code, [ln for ln in err.splitlines() if ln.strip() and "Warning" not in ln
                  and "forward_call" not in ln and "Loading weights" not in ln]


def test_record_on_a_text_only_pair_needs_no_audio(capsys, tmp_path):
    out = tmp_path / "rec.json"
    code, err = cli(capsys, "record", DEC / "correct.py", *HF, "--set", "max_new_tokens=24",
                    "--fail-on", "error", "--out", out)
    assert code == 0, err
    d = json.loads(out.read_text(encoding="utf-8"))
    (r,) = d["results"]
    assert d["backend"] == "hf" and r["ok"] and r["audio"] is None and r["text"]
    assert r["recording"]["prompt_ids"] and not any(f["severity"] == "error" for f in r["findings"])
    assert any(ln.startswith("prompt: recorded; no error finding") for ln in err), err


def test_record_without_audio_on_an_audio_backend_is_a_usage_error(capsys):
    code, err = cli(capsys, "record", DEC / "correct.py")
    assert code == 2 and len(err) == 1 and "--backend hf --prompt TEXT" in err[0]


def test_fail_on_error_gates_record_on_a_buggy_loop(capsys, tmp_path):
    code, err = cli(capsys, "record", DEC / "no_resync.py", CLIP, "--fail-on", "error",
                    "--out", tmp_path / "rec.json")
    assert code == 1
    assert err[-1].startswith("--fail-on error: ") and "stale_cache" in err[-1]
    # the same recording without the gate: the clip ran, exit 0
    code, _ = cli(capsys, "record", DEC / "no_resync.py", CLIP, "--out", tmp_path / "rec2.json")
    assert code == 0


def test_fail_on_line_counts_as_the_summary_line_does(capsys, tmp_path):
    """Issue 58.9: the summary says '1 error: context_mismatch (explains unverified_end)'; the
    gate's line counted every nested symptom as another error ('2 finding(s) of severity error')."""
    code, err = cli(capsys, "record", DEC / "cloud_cache_short.py", CLIP, "--fail-on", "error",
                    "--out", tmp_path / "rec.json")
    d = json.loads((tmp_path / "rec.json").read_text(encoding="utf-8"))
    found = d["results"][0]["findings"]
    nested = [f["code"] for f in found if f["severity"] == "error" and f["explained_by"]]
    summary = next(ln for ln in err if "recorded;" in ln)
    assert code == 1 and nested and "1 error: context_mismatch (explains " in summary, err
    assert err[-1] == (f"--fail-on error: 1 error (+{len(nested)} nested symptom{'s' * (len(nested) > 1)}): "
                       f"{CLIP}: context_mismatch (explains {', '.join(nested)})"), err


@pytest.mark.parametrize("fault,level,expected", [
    (None, "error", 0), ("no_resync", "error", 1), ("no_resync", None, 0),
])
def test_fail_on_gates_run_and_run_fault(capsys, tmp_path, fault, level, expected):
    argv = ["run", CLIP, "--set", "max_new_tokens=48", "--out", tmp_path / "r.json"]
    argv += ["--fault", fault] if fault else []
    argv += ["--fail-on", level] if level else []
    code, err = cli(capsys, *argv)
    assert code == expected, err
    if expected:
        assert "--fail-on error: " in err[-1] and "stale_cache" in err[-1]


def test_fail_on_warning_counts_warnings(capsys, tmp_path):
    # edge_no_audio.py: the edge decodes without the clip (an audio_missing warning, no error)
    args = ["record", DEC / "edge_no_audio.py", CLIP, "--set", "max_new_tokens=32", "--out", tmp_path / "r.json"]
    assert cli(capsys, *args, "--fail-on", "error")[0] == 0
    code, err = cli(capsys, *args, "--fail-on", "warning")
    assert code == 1 and "audio_missing" in err[-1]


def test_a_wrong_signature_is_one_line_naming_the_def_and_the_expected_call(capsys, tmp_path):
    (tmp_path / "mine.py").write_text("import torch\n\n\n@torch.no_grad()\ndef decode(edge, cloud, ids):\n"
                                      "    return []\n")
    code, err = cli(capsys, "record", tmp_path / "mine.py", CLIP)
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0]
    assert "mine.py:4 decode(edge, cloud, ids)" in err[0]
    assert "expected decode(edge, cloud, tokenizer, input_ids, k=..., max_new_tokens=..., stop_ids=...)" in err[0]


def test_an_exception_inside_torch_names_the_users_line(capsys, tmp_path):
    (tmp_path / "mine.py").write_text(
        "import torch\n\ndef decode(edge, cloud, tok, ids, k=4, max_new_tokens=8, stop_ids=()):\n"
        "    edge(ids, position_ids=torch.zeros(3, 3, 3, 3, dtype=torch.long))\n    return []\n")
    out = tmp_path / "r.json"
    code, err = cli(capsys, "record", tmp_path / "mine.py", CLIP, "--out", out)
    assert code == 1 and len(err) == 1 and "Traceback" not in err[0]
    r = json.loads(out.read_text(encoding="utf-8"))["results"][0]
    assert r["ok"] is False and "\n" not in r["error"] and "at mine.py:4 in decode" in r["error"]


def test_a_recording_cut_to_half_its_forwards_is_named_incomplete(capsys, tmp_path):
    from specdec_core.api import load_backend
    from specdec_core.recorder import analyze

    out = tmp_path / "rec.json"
    assert cli(capsys, "record", DEC / "correct.py", CLIP, "--out", out)[0] == 0
    rec = json.loads(out.read_text(encoding="utf-8"))["results"][0]["recording"]
    tok = load_backend("demo").tokenizer
    assert not [f for f in analyze(rec, tok)[1] if f["severity"] == "error"]   # whole: clean
    n = len(rec["forwards"])
    rec["forwards"] = rec["forwards"][: n // 2]
    found = analyze(rec, tok)[1]
    roots = [f for f in found if not f["explained_by"]]
    assert [f["code"] for f in roots if f["severity"] == "error"] == ["incomplete_recording"]
    assert "incomplete recording" in roots[0]["title"] and f"({n // 2} forwards recorded)" in roots[0]["detail"]
    # what the cut looks like to the other checks is nested under it, never a root
    assert all(f["explained_by"] == "incomplete_recording" for f in found if f is not roots[0]
               and f["severity"] != "info")
