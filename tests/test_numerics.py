"""Bug or numerics? (issue 27): --dtype, the numerics probe, and the verdict at the first
divergence from the cloud-only reference, on the real demo pair cast to bfloat16 (the CPU
stand-in for a GPU deployment) and real sample clips.

happy_01 at k=3 in bfloat16: the built-in (correct) greedy loop leaves HF generate's output at
token 36 on an exact bf16 tie in the reference; the lenient_rank fault leaves it at token 2 by
accepting a rank-2 draft."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from specdec_core.analysis import divergence
from specdec_core.api import load_backend, prepare, run_clip
from specdec_core.decoding.config import DecodeConfig
from specdec_core.errors import BackendError
from specdec_core.recorder.observe.hooks import _top
from specdec_core.decoding.numerics import probe, window_starts

ROOT = Path(__file__).resolve().parents[1]
CLIP = str(ROOT / "sample_audio" / "happy_01.wav")
LONG = {"stop_at_first_sentence": False, "max_new_tokens": 128, "k": 3}


def _cfg(faults=()):
    return DecodeConfig.from_overrides(dict(LONG), [], list(faults))


@pytest.fixture(scope="module")
def bf16():
    return load_backend("demo", dtype="bfloat16")


@pytest.fixture(scope="module")
def correct_bf16(bf16):
    return run_clip(bf16, CLIP, _cfg(), baseline=True)


def _errors(diags):
    return [d["code"] for d in diags if d["severity"] == "error"]


# -- --dtype ------------------------------------------------------------------------------------
def test_dtype_loads_the_pair_in_that_dtype_and_the_trace_says_so(bf16, correct_bf16):
    assert next(bf16.cloud.parameters()).dtype == torch.bfloat16
    assert next(bf16.edge.parameters()).dtype == torch.bfloat16
    assert correct_bf16["trace"]["info"]["dtype"] == "bfloat16"
    assert load_backend("demo").describe()["dtype"] == "float32"      # the default is unchanged
    with pytest.raises(BackendError, match="dtype must be one of"):
        load_backend("demo", dtype="float8")


def test_bad_dtype_on_the_cli_is_a_one_line_usage_error(capsys):
    p = subprocess.run([sys.executable, "-m", "specdec_core", "run", CLIP, "--dtype", "fp8"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "--dtype" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    from specdec_core.cli import main

    for cmd in (["record", "examples/decoders/correct.py", CLIP], ["bench"],
                ["batch", "sample_audio/manifest.csv", "--out", "/tmp/x"]):
        with pytest.raises(SystemExit) as e:
            main([*cmd, "--dtype", "fp8"])
        err = capsys.readouterr().err
        assert e.value.code == 2 and "--dtype" in err and len(err.strip().splitlines()) == 1


# -- the built-in decoder against cloud-only ---------------------------------------------------
def test_correct_loop_in_bf16_diverges_by_numerics_not_a_bug(correct_bf16):
    r = correct_bf16
    fd = r["baseline"]["first_divergence"]
    assert r["token_ids"] != r["baseline"]["token_ids"]
    assert fd["cause"] == "numerics", fd
    assert fd["index"] == 36 and fd["width_reference"] == 1 and fd["width_user"] == 4
    # the flip is a near-tie: both margins are within a few bf16 steps
    assert fd["margin_reference"] <= fd["tolerance"] and fd["margin_user"] <= fd["tolerance"]
    diags = r["trace"]["diagnostics"]
    assert _errors(diags) == []
    nd = [d for d in diags if d["code"] == "numeric_divergence"]
    assert len(nd) == 1 and nd[0]["severity"] == "info"
    assert "differ for good" in nd[0]["detail"]
    assert r["trace"]["reference"]["first_divergence"] == fd
    # the Live tab's token view marks the divergence point with its cause
    from components.token_view import render_tokens

    html = render_tokens(r["trace"])
    assert html.count('data-divergence="numerics"') == 1 and "⟂ numerics" in html
    assert 'data-divergence' not in render_tokens({**r["trace"], "reference": None})


def test_the_verify_row_of_every_verified_token_is_kept(correct_bf16):
    toks = correct_bf16["trace"]["tokens"]
    verified = [t for t in toks if t["target_rank"] is not None]
    assert verified and all(len(t["cloud_top2"]) == 3 for t in verified)
    fd = correct_bf16["baseline"]["first_divergence"]
    t = toks[fd["index"]]
    assert t["cloud_top2"][0] == t["id"] and t["cloud_top2"][2] == fd["margin_user"]


def test_lossy_loop_in_bf16_is_still_a_decoder_divergence(bf16):
    r = run_clip(bf16, CLIP, _cfg(["lenient_rank"]), baseline=True)
    fd = r["baseline"]["first_divergence"]
    assert "lossless_violation" in _errors(r["trace"]["diagnostics"])
    assert fd["cause"] == "decoder" and fd["explained_by"] == "lossless_violation"
    assert not any(d["code"] == "numeric_divergence" for d in r["trace"]["diagnostics"])


def test_float32_is_unchanged_token_for_token():
    r = run_clip(load_backend("demo"), CLIP, _cfg(), baseline=True)
    assert r["token_ids"] == r["baseline"]["token_ids"]
    assert r["baseline"]["first_divergence"] is None
    assert r["trace"]["info"]["dtype"] == "float32"
    assert r["trace"]["numerics"]["max_logit_diff"] < 1e-3
    assert [d for d in r["trace"]["diagnostics"] if d["severity"] != "info"] == []


# -- the numerics probe --------------------------------------------------------------------------
def test_probe_sees_bf16_differences_that_float32_does_not(bf16):
    out = list(range(300, 340))                  # teacher-forced: any output will do
    nums = {}
    for name, b in (("bfloat16", bf16), ("float32", load_backend("demo"))):
        nums[name] = probe(b, prepare(b, CLIP, DecodeConfig()), out, k=4)
        assert nums[name]["dtype"] == name and nums[name]["verify_width"] == 5
        assert nums[name]["positions"] == 30
    assert nums["bfloat16"]["max_logit_diff"] >= 0.03        # a bf16 step near logit 10
    assert nums["float32"]["max_logit_diff"] < 1e-3
    assert window_starts(10, 3, 5) == [] and window_starts(10, 20, 5, 3) == [10, 18, 25]


# -- the recorder (record --reference) -------------------------------------------------------------
def _record(decoder, tmp_path, capsys):
    from specdec_core.cli import main

    out = tmp_path / "rec.json"
    rc = main(["record", str(ROOT / "examples" / "decoders" / decoder), CLIP, "--reference",
               "--dtype", "bfloat16", "--set", "k=3", "--out", str(out)])
    assert rc == 0
    return json.loads(out.read_text(encoding="utf-8"))["results"][0], capsys.readouterr().err


def test_record_reference_correct_loop_in_bf16_has_no_error(tmp_path, capsys):
    r, err = _record("correct.py", tmp_path, capsys)
    assert [f for f in r["findings"] if f["severity"] == "error"] == []
    assert r["recording"]["numerics"]["dtype"] == r["recording"]["dtype"] == "bfloat16"
    assert "can flip" in err or "exact ties can still flip" in err
    fd = r["reference"]["first_divergence"]
    assert fd["cause"] == "numerics" and fd["index"] == 36, fd
    assert fd["width_user"] == 4 and fd["width_reference"] == 1
    assert [f["code"] for f in r["findings"]] == ["numeric_divergence"]
    assert "leaves the reference at token 36: numerics" in err


def test_record_reference_lenient_loop_in_bf16_is_decoder(tmp_path, capsys):
    r, err = _record("lenient_rank.py", tmp_path, capsys)
    codes = [f["code"] for f in r["findings"] if f["severity"] == "error"]
    fd = r["reference"]["first_divergence"]
    assert "lossless_violation" in codes
    assert fd["cause"] == "decoder" and fd["explained_by"] == "lossless_violation"
    assert "decoder" in err


# -- pure pieces ---------------------------------------------------------------------------------
def test_recorder_top5_breaks_exact_ties_like_argmax():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0, 2.0]])
    top = _top(x, 4)
    assert top.indices.tolist() == [[1, 2, 4, 5]] and int(x.argmax()) == 1


def test_verdict_rules():
    ref = {"margin": 0.0, "gap": 0.0, "width": 1, "scale": 12.0}
    mine = {"margin": 0.0625, "gap": 0.0625, "width": 5, "argmax": True, "same_context": True}
    u, r = {"id": 1, "text": "a"}, {"id": 2, "text": "b"}
    num = {"dtype": "bfloat16", "max_logit_diff": 0.0625}
    assert divergence.verdict(3, u, r, 2, ref, mine, num)["cause"] == "numerics"
    lossy = divergence.verdict(3, u, r, 2, ref, {**mine, "argmax": False}, num,
                               [{"code": "lossless_violation", "severity": "error"}])
    assert lossy["cause"] == "decoder" and lossy["explained_by"] == "lossless_violation"
    far = divergence.verdict(3, u, r, 2, {**ref, "gap": 3.0}, mine, num)
    assert far["cause"] == "decoder" and far["swing"] > far["tolerance"]
    ctx = divergence.verdict(3, u, r, 2, ref, {**mine, "same_context": False}, num)
    assert ctx["cause"] == "decoder"
    f32 = divergence.verdict(3, u, r, 2, {**ref, "gap": 0.05}, mine,
                             {"dtype": "float32", "max_logit_diff": 1e-5})
    assert f32["cause"] == "decoder"          # fp32 cannot move logits by 0.1
    assert divergence.first_index([1, 2, 3], [1, 2, 3]) is None
    assert divergence.first_index([1, 2], [1, 2, 3]) == 2


def test_inspect_and_cli_show_the_probe_line():
    from components.divergence import numerics_html

    num = {"dtype": "bfloat16", "max_logit_diff": 0.0625, "verify_width": 5, "positions": 30}
    html = numerics_html(num)
    assert "ties closer than 0.0625 logits can flip" in html and "bfloat16" in html
    assert "exact ties can still flip" in numerics_html({**num, "max_logit_diff": 0.0})
    assert numerics_html(None) == ""


def test_the_app_in_bf16_labels_the_divergence_of_a_correct_loop():
    """The real app with SPECSCOPE_DTYPE=bfloat16, through its /run endpoint with "compare with
    cloud-only" on: the Live tab's run gives the numerics verdict and the marked token view."""
    sys.path.insert(0, str(ROOT / "tests"))
    from browser_util import app_process
    from gradio_client import Client

    from components.token_view import render_tokens

    cfg = json.dumps(LONG)
    with app_process(env={"SPECSCOPE_DTYPE": "bfloat16"}, log_name="app-bf16.log") as (url, _):
        res, _text = Client(url, verbose=False).predict("happy_01", None, cfg, "demo", True,
                                                        api_name="/run")
    tr = res["trace"]
    assert tr["info"]["dtype"] == "bfloat16"
    fd = res["baseline"]["first_divergence"]
    assert fd["cause"] == "numerics" and tr["reference"]["first_divergence"] == fd
    assert [d["code"] for d in tr["diagnostics"]] == ["numeric_divergence"]
    assert 'data-divergence="numerics"' in render_tokens(tr)
