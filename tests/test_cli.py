"""The CLI contract of the design page, run as a real subprocess on saved tiny models."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_run_hf_writes_the_contract_json(pair, tmp_path):
    out = tmp_path / "r.json"
    p = cli("run", "--backend", "hf", "--edge-model", str(pair / "edge"), "--cloud-model", str(pair / "cloud"),
            "--prompt", "说话人语速", "--set", "max_new_tokens=20", "--set", "stop_at_first_sentence=false",
            "--baseline", "--out", str(out))
    assert p.returncode == 0, p.stderr
    data = json.loads(out.read_text())
    assert set(data) == {"backend", "config", "results", "pooled_findings"} and data["backend"] == "hf"
    assert data["pooled_findings"] == []          # one clip: nothing to pool
    assert data["config"]["max_new_tokens"] == 20
    (r,) = data["results"]
    assert r["ok"] is True and {"audio", "text", "token_ids", "metrics", "trace", "baseline"} <= set(r)
    assert r["baseline"]["token_ids"] == r["token_ids"]  # greedy SD is lossless
    assert r["trace"]["token_ids"] == r["token_ids"]
    for key in ("acceptance_rate", "mean_accepted_length", "per_position_acceptance", "cloud_calls",
                "cloud_call_rate", "target_forwards", "draft_forwards", "corrections", "tokens_per_s",
                "wall_s", "ended_by"):
        assert key in r["metrics"]


@pytest.mark.parametrize("args,needle", [
    (["--set", "k=0"], "k must be in [1, 32]"),
    (["--set", "verify=fast"], "verify must be one of"),
    (["--fault", "gremlin"], "unknown fault 'gremlin'"),
    (["--set", "kk=3"], "unknown knob"),
    (["--preset", "turbo"], "unknown preset"),
    (["--backend", "quantum"], "unknown backend 'quantum'"),
    (["--config", "/no/such/cfg.json"], "cannot read config"),
])
def test_usage_errors_exit_2_with_one_line(pair, args, needle):
    p = cli("run", "--backend", "hf", "--edge-model", str(pair / "edge"), "--cloud-model",
            str(pair / "cloud"), "--prompt", "说话", *args)
    assert p.returncode == 2
    assert needle in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_missing_model_folder_is_a_usage_error(tmp_path):
    p = cli("run", "--backend", "hf", "--edge-model", str(tmp_path / "nope"), "--cloud-model",
            str(tmp_path / "nope"), "--prompt", "x")
    assert p.returncode == 2 and "model not found" in p.stderr and "Traceback" not in p.stderr


def test_faults_and_presets_listing():
    p = cli("faults")
    assert p.returncode == 0
    for name in ("string_stop", "special_text_stop", "draft_penalties", "lenient_rank", "no_resync",
                 "double_temperature", "mask_1x1", "input_corruption"):
        assert name in p.stdout
    assert cli("presets").returncode == 0
