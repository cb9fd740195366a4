"""The CLI contract of the design page, run as a real subprocess on saved tiny models."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli_many import run_many
from tiny import char_tokenizer, perturbed, tiny_qwen2

ROOT = Path(__file__).resolve().parents[1]


def cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "specdec_core", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("pair")
    tok = char_tokenizer()
    cloud = tiny_qwen2(64, hidden=48, layers=2, seed=1, init=0.3)
    edge = perturbed(cloud, 0.6, 2)
    for name, m in (("edge", edge), ("cloud", cloud)):
        m.save_pretrained(d / name)
        tok.save_pretrained(d / name)
    return d


def test_run_hf_writes_the_contract_json(cheap):
    p, out = cheap["contract"], cheap["contract_out"]
    assert p.returncode == 0, p.stderr
    data = json.loads(out.read_text())
    assert set(data) == {"backend", "config", "results", "pooled_findings"} and data["backend"] == "hf"
    assert data["pooled_findings"] == []          # one clip: nothing to pool
    assert data["config"]["max_new_tokens"] == 20
    (r,) = data["results"]
    assert r["ok"] is True and {"audio", "text", "token_ids", "metrics", "trace", "baseline"} <= set(r)
    assert r["baseline"]["token_ids"] == r["token_ids"]  # greedy SD is lossless
    assert "cloud-only: matches the reference token for token" in p.stderr   # the --baseline line
    assert r["trace"]["token_ids"] == r["token_ids"]
    for key in ("acceptance_rate", "mean_accepted_length", "per_position_acceptance", "cloud_calls",
                "cloud_call_rate", "target_forwards", "draft_forwards", "corrections", "tokens_per_s",
                "wall_s", "ended_by"):
        assert key in r["metrics"]


USAGE = [
    (["--set", "k=0"], "k must be in [1, 32]"),
    (["--set", "verify=fast"], "verify must be one of"),
    (["--fault", "gremlin"], "unknown fault 'gremlin'"),
    (["--set", "kk=3"], "unknown knob"),
    (["--preset", "turbo"], "unknown preset"),
    (["--backend", "quantum"], "unknown backend 'quantum'"),
    (["--config", "/no/such/cfg.json"], "cannot read config"),
]


@pytest.fixture(scope="module")
def cheap(pair, tmp_path_factory):
    """The module's command lines, but the one that tests a fresh process's first decode, run
    in one CLI process (tests/cli_many.py: a process start costs more than most of these lines'
    own work), by name."""
    nope = tmp_path_factory.mktemp("nope") / "nope"
    out = tmp_path_factory.mktemp("contract") / "r.json"
    hf = ["run", "--backend", "hf", "--edge-model", pair / "edge", "--cloud-model", pair / "cloud"]
    base = [*hf, "--prompt", "说话人语速", "--set", "max_new_tokens=12", "--set", "stop_at_first_sentence=false"]
    cases = {**{f"usage{i}": [*hf, "--prompt", "说话", *args] for i, (args, _) in enumerate(USAGE)},
             "missing": ["run", "--backend", "hf", "--edge-model", nope, "--cloud-model", nope, "--prompt", "x"],
             "graphs": [*hf, "--prompt", "说话", "--set", "engine=graphs"],
             "faults": ["faults"], "presets": ["presets"],
             "contract": [*hf, "--prompt", "说话人语速", "--set", "max_new_tokens=20", "--set",
                          "stop_at_first_sentence=false", "--baseline", "--out", out],
             "gate": [*base, "--fail-on", "error"], "stdout_json": [*base, "--out", "-"],
             "check": ["check", "--backend", "hf", "--edge-model", pair / "edge", "--cloud-model", pair / "cloud"]}
    return dict(zip(cases, run_many(cases.values())), contract_out=out)


@pytest.mark.parametrize("i,needle", [(i, needle) for i, (_, needle) in enumerate(USAGE)],
                         ids=[f"args{i}-{needle}" for i, (_, needle) in enumerate(USAGE)])
def test_usage_errors_exit_2_with_one_line(cheap, i, needle):
    p = cheap[f"usage{i}"]
    assert p.returncode == 2
    assert needle in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_missing_model_folder_is_a_usage_error(cheap):
    p = cheap["missing"]
    assert p.returncode == 2 and "model not found" in p.stderr and "Traceback" not in p.stderr


def test_one_process_reads_as_a_fresh_process_each(cheap, pair):
    """tests/cli_many.py (the module's command lines in one process) reports what a process of
    its own reports: the same exit status, stdout and stderr, here for a usage error that is not
    the process's first command line."""
    own = cli("run", "--backend", "hf", "--edge-model", str(pair / "edge"), "--cloud-model",
              str(pair / "cloud"), "--prompt", "说话", *USAGE[5][0])
    shared = cheap["usage5"]
    assert (shared.returncode, shared.stdout, shared.stderr) == (own.returncode, own.stdout, own.stderr)
    assert own.returncode == 2 and own.stderr


def test_faults_and_presets_listing(cheap):
    p = cheap["faults"]
    assert p.returncode == 0
    for name in ("string_stop", "special_text_stop", "draft_penalties", "lenient_rank", "no_resync",
                 "double_temperature", "mask_1x1", "input_corruption"):
        assert name in p.stdout
    assert cheap["presets"].returncode == 0


def test_faults_and_the_page_describe_a_fault_with_one_text(cheap):
    """Issue 58.9: `faults` said "fractured/repeated text" for no_resync where the page's fault
    picker said "text often identical": both now print FaultInfo.text."""
    from components.formatting import snake_words
    from specdec_core.decoding.faults import FAULTS
    from ui.knobs import fault_choices

    line = next(ln for ln in cheap["faults"].stdout.splitlines() if ln.startswith("no_resync "))
    label = dict((v, k) for k, v in fault_choices())["no_resync"]
    said = FAULTS["no_resync"].text
    assert line.endswith(said) and "seen here: text often identical" in said, line
    assert snake_words(said) in label, (said, label)


def test_run_without_out_prints_the_summary_not_the_json(cheap):
    """Issue 50 (7): without --out a CI gate reads the human summary, not ~100 KB of trace JSON;
    `--out -` still writes the JSON to stdout."""
    p = cheap["gate"]     # this random tiny pair fails the gate (exit 1)
    assert p.returncode in (0, 1) and "Traceback" not in p.stderr, p.stderr
    assert p.stdout == "" and '"results"' not in p.stderr
    assert "None: ok: " in p.stderr and "(no JSON written: --out FILE, or --out - for stdout)" in p.stderr
    p = cheap["stdout_json"]
    assert p.returncode in (0, 1) and "no JSON written" not in p.stderr, p.stderr
    assert json.loads(p.stdout)["results"][0]["ok"] is True


def test_run_warms_up_before_the_first_timed_decode(pair):
    """Issue 58.9: a fresh process's first decode paid one-time set-up and the CLI printed it as
    the decoder's time; `run` now decodes a few tokens untimed first, as the page does, and says so
    on the first time line."""
    p = cli("run", "--backend", "hf", "--edge-model", str(pair / "edge"), "--cloud-model", str(pair / "cloud"),
            "--prompt", "说话人语速", "--set", "max_new_tokens=12", "--set", "stop_at_first_sentence=false")
    timed = [ln for ln in p.stderr.splitlines() if ln.strip().startswith("time: ")]
    assert p.returncode == 0 and timed and timed[0].endswith(
        " · after an untimed 8-token warm-up, as on the page (a fresh process's first decode pays set-up)"), p.stderr


def test_graphs_engine_on_a_cpu_is_a_usage_error(cheap):
    p = cheap["graphs"]
    assert p.returncode == 2, p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("specscope: error")]   # (hf prints load bars)
    assert len(errors) == 1 and "needs a CUDA device" in errors[0] and "Traceback" not in p.stderr


def test_check_names_passed_checks_by_what_passed(cheap):
    p = cheap["check"]
    assert p.returncode == 0, p.stdout + p.stderr
    (ok,) = [ln for ln in p.stdout.splitlines() if ln.startswith("ok ")]
    assert "same tokenizer" in ok and "same stop ids" in ok
    assert "mismatch" not in ok and "untested" not in ok and "not_croppable" not in ok
