"""The pair check (issue 26): `python -m specdec_core check` on the project's own tiny pairs,
each mismatch built from real folders and refused with its code; the load-time check; the
Live tab's pair panel. Exit codes through the real CLI in a subprocess."""
from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pytest

from specdec_core.findings import KEYS
from specdec_core.backends import load_backend
from specdec_core.backends.demo import MODELS_DIR
from devtools.omni_tiny import make_tiny_pair, omni_tokenizer
from specdec_core.errors import BackendError
from specdec_core.pairs import check_folders, error_message, versions
from specdec_core.recorder.checks import registry
from cli_many import run_many
from tiny import tiny_qwen2

ROOT = Path(__file__).resolve().parents[1]
CODES = {"tokenizer_mismatch", "stop_ids_mismatch", "chat_template_mismatch", "vocab_widths",
         "rope_mismatch", "audio_frontend_mismatch", "cache_not_croppable", "dtype_mismatch",
         "transformers_untested"}


@pytest.fixture(scope="module")
def cli_runs(omni, tmp_path_factory):
    """The module's `check` command lines in one CLI process (tests/cli_many.py: a process start
    costs more than a check), by name; "dir": their folder."""
    d = tmp_path_factory.mktemp("cli")
    pair = copy_pair(omni, d / "mel80")
    edit_json(pair["edge"] / "preprocessor_config.json", feature_size=80)
    cases = {"demo": ["--backend", "demo", "--json", d / "demo.json"],
             "omni": ["--backend", "omni", "--edge-model", omni["edge"], "--cloud-model", omni["cloud"],
                      "--json", d / "omni.json"],
             "mel80": ["--backend", "omni", "--edge-model", pair["edge"], "--cloud-model", pair["cloud"],
                       "--json", d / "mel80.json"],
             "missing": ["--backend", "hf", "--edge-model", d / "missing", "--cloud-model", MODELS_DIR / "cloud"]}
    return dict(zip(cases, run_many([["check", *argv] for argv in cases.values()])), dir=d)


def codes(report, severity=None):
    return {f["code"] for f in report["checks"] if severity in (None, f["severity"])}


def edit_json(path: Path, **changes):
    d = json.loads(path.read_text())
    d.update(changes)
    path.write_text(json.dumps(d))


@pytest.fixture(scope="module")
def omni(tmp_path_factory):
    return make_tiny_pair(tmp_path_factory.mktemp("omni"))


def copy_pair(src: dict, dst: Path, weights: bool = False) -> dict:
    """The pair's folders without weights (the check reads none) unless `weights`."""
    out = {}
    for role in ("edge", "cloud"):
        shutil.copytree(src[role], dst / role, ignore=None if weights else
                        shutil.ignore_patterns("*.safetensors"))
        out[role] = dst / role
    return out


@pytest.fixture
def demo(tmp_path):
    return copy_pair({"edge": MODELS_DIR / "edge", "cloud": MODELS_DIR / "cloud"}, tmp_path)


def test_every_contract_code_is_a_check():
    pair = registry.of("pair")
    assert {c.fn.__name__ for c in pair} == CODES == {code for c in pair for code in c.codes}


def test_cli_demo_and_tiny_omni_pass(cli_runs):
    out = cli_runs["dir"] / "demo.json"
    p = cli_runs["demo"]
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(out.read_text())
    assert rep["checks"] == [] and set(rep["passed"]) == CODES and rep["usable"]
    assert set(rep["versions"]) == {"python", "torch", "transformers", "gradio"} and rep["device"]
    out = cli_runs["dir"] / "omni.json"
    p = cli_runs["omni"]
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(out.read_text())
    assert [(f["code"], f["severity"]) for f in rep["checks"]] == [("vocab_widths", "info")]
    assert all(tuple(f) == KEYS for f in rep["checks"])   # the one Finding type (findings.py)
    assert "info     vocab_widths" in p.stdout and "usable" in p.stdout


def test_cli_edge_expecting_80_mel_bins_is_unusable(cli_runs):
    out = cli_runs["dir"] / "mel80.json"
    p = cli_runs["mel80"]
    assert p.returncode == 1, p.stdout + p.stderr
    rep = json.loads(out.read_text())
    f = rep["checks"][0]
    assert (f["code"], f["severity"]) == ("audio_frontend_mismatch", "error") and not rep["usable"]
    assert "mel bins" in f["detail"] and "128" in f["detail"] and "80" in f["detail"]
    assert "Traceback" not in p.stderr


def test_cli_usage_errors_exit_2(cli_runs, capsys):
    from specdec_core.cli import main

    assert main(["check", "--backend", "nope"]) == 2 and "unknown backend" in capsys.readouterr().err
    p = cli_runs["missing"]
    assert p.returncode == 2 and "model not found" in p.stderr and "Traceback" not in p.stderr


def test_audio_encoder_of_the_edge_takes_other_mel_bins(omni, tmp_path):
    pair = copy_pair(omni, tmp_path)
    cfg = json.loads((pair["edge"] / "config.json").read_text())
    cfg["audio_config"]["num_mel_bins"] = 80
    (pair["edge"] / "config.json").write_text(json.dumps(cfg))
    rep = check_folders(pair["edge"], pair["cloud"])
    assert codes(rep, "error") == {"audio_frontend_mismatch"}
    assert "edge audio encoder takes 80 mel bins" in rep["checks"][0]["detail"]


def test_qwen2_with_the_omni_tokenizer_against_the_demo_tokenizer(tmp_path):
    edge = tmp_path / "edge"
    tiny_qwen2(772).save_pretrained(edge)
    omni_tokenizer().save_pretrained(edge)
    rep = check_folders(edge, MODELS_DIR / "cloud")
    assert "tokenizer_mismatch" in codes(rep, "error") and not rep["usable"]
    # the same refusal stops a backend load, in one line, before any weights are read
    with pytest.raises(BackendError, match="pair check tokenizer_mismatch") as e:
        load_backend("hf", edge_model=str(edge), cloud_model=str(MODELS_DIR / "cloud"))
    assert "\n" not in str(e.value)


def test_same_size_tokenizer_with_shifted_ids(omni, tmp_path):
    """Both report the same size and still disagree: every id shifted by one."""
    pair = copy_pair(omni, tmp_path)
    shifted = omni_tokenizer(lead=("<|extra_0|>",))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (pair["edge"] / f).unlink()
    shifted.save_pretrained(pair["edge"])
    rep = check_folders(pair["edge"], pair["cloud"])
    f = next(f for f in rep["checks"] if f["code"] == "tokenizer_mismatch")
    assert f["severity"] == "error" and "is id" in f["detail"]


def test_stop_ids_mismatch(demo):
    edit_json(demo["edge"] / "generation_config.json", eos_token_id=[1])
    rep = check_folders(demo["edge"], demo["cloud"])
    assert codes(rep, "error") == {"stop_ids_mismatch"}
    assert "cloud stops on 0 <|endoftext|>, 2 <|im_end|>" in rep["checks"][0]["detail"]


def test_chat_template_mismatch_is_a_warning(demo):
    t = demo["edge"] / "chat_template.jinja"
    t.write_text(t.read_text().replace("<|im_start|>{{ message['role'] }}\n", "<|im_start|>{{ message['role'] }}: "))
    rep = check_folders(demo["edge"], demo["cloud"])
    assert codes(rep) == {"chat_template_mismatch"} and rep["usable"]


def test_rope_mrope_sections_and_theta(omni, demo, tmp_path):
    pair = copy_pair(omni, tmp_path / "o")
    cfg = json.loads((pair["edge"] / "config.json").read_text())
    cfg["text_config"]["rope_parameters"]["mrope_section"] = [8, 0, 0]
    (pair["edge"] / "config.json").write_text(json.dumps(cfg))
    rep = check_folders(pair["edge"], pair["cloud"])
    assert codes(rep, "error") == {"rope_mismatch"} and "mrope_section" in rep["checks"][0]["detail"]
    edit_json(demo["edge"] / "config.json", rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    rep = check_folders(demo["edge"], demo["cloud"])
    assert codes(rep, "warning") == {"rope_mismatch"} and rep["usable"]


def test_caches_that_cannot_roll_back(demo):
    cfg = json.loads((demo["edge"] / "config.json").read_text())
    del cfg["layer_types"]                    # derived from these by the config class
    cfg.update(sliding_window=64, use_sliding_window=True, max_window_layers=0)
    (demo["edge"] / "config.json").write_text(json.dumps(cfg))
    rep = check_folders(demo["edge"], demo["cloud"])
    assert codes(rep, "error") == {"cache_not_croppable"} and "window 64" in rep["checks"][0]["detail"]
    edit_json(demo["edge"] / "config.json", use_sliding_window=False)
    edit_json(demo["cloud"] / "generation_config.json", cache_implementation="static")
    rep = check_folders(demo["edge"], demo["cloud"])
    assert codes(rep, "error") == {"cache_not_croppable"} and "static" in rep["checks"][0]["detail"]


def test_dtype_and_narrow_head_are_warnings(demo):
    edit_json(demo["edge"] / "config.json", dtype="bfloat16", vocab_size=700)
    rep = check_folders(demo["edge"], demo["cloud"])
    assert {(f["code"], f["severity"]) for f in rep["checks"]} == {
        ("dtype_mismatch", "warning"), ("vocab_widths", "warning")}
    assert rep["usable"]


def test_untested_transformers_warns_once(demo, monkeypatch):
    assert versions.is_tested("5.24.0", ">=5.23.0,<6") and not versions.is_tested("4.57.6", ">=5.23.0,<6")
    assert not versions.is_tested("5.25.0.dev0", ">=5.23.0,<6")   # dev builds were never tested
    assert versions.is_tested(versions.transformers_version())     # CI runs inside the range
    monkeypatch.setattr(versions, "tested_range", lambda: ">=99")
    rep = check_folders(demo["edge"], demo["cloud"])
    assert codes(rep) == {"transformers_untested"} and rep["usable"]
    monkeypatch.setattr(versions, "_warned", set())
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        assert versions.warn_if_untested() and versions.warn_if_untested()
    assert [w.category for w in got] == [versions.UntestedVersionWarning]


def test_error_message_is_one_line(omni, tmp_path):
    pair = copy_pair(omni, tmp_path)
    edit_json(pair["edge"] / "preprocessor_config.json", feature_size=80, sampling_rate=8000)
    msg = error_message(check_folders(pair["edge"], pair["cloud"]))
    assert msg.startswith("pair check audio_frontend_mismatch") and "\n" not in msg
    assert "sampling rate: cloud 16000, edge 8000" in msg


def test_pair_panel_collapsed_when_all_is_well(omni):
    from components.pair_panel import pair_panel_html

    ok = pair_panel_html(check_folders(omni["edge"], omni["cloud"]))
    assert 'data-state="ok"' in ok and " open" not in ok and "vocab_widths" in ok
    bad = pair_panel_html({"checks": [{"code": "dtype_mismatch", "severity": "warning", "title": "t",
                                       "detail": "d", "fix": "f"}], "passed": [], "usable": True})
    assert 'data-state="warning" open' in bad and "dtype_mismatch" in bad
    assert "open" in pair_panel_html(None, "edge model not found: /x")
    assert "not checked yet" in pair_panel_html(None)


def test_run_prints_the_load_time_warnings(tmp_path, capsys):
    """A usable pair with a warning loads, and `run` says so on stderr before decoding."""
    from specdec_core.cli import main

    pair = copy_pair({"edge": MODELS_DIR / "edge", "cloud": MODELS_DIR / "cloud"}, tmp_path, weights=True)
    edit_json(pair["edge"] / "config.json", dtype="bfloat16")
    rc = main(["run", "--backend", "hf", "--edge-model", str(pair["edge"]), "--cloud-model",
               str(pair["cloud"]), "--prompt", "<|im_start|>user\n说话人", "--set", "max_new_tokens=3",
               "--set", "min_new_tokens=1", "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "pair check warning dtype_mismatch" in err and "cloud float32, edge bfloat16" in err


def test_heads_of_different_widths_are_info(omni, tmp_path):
    """Like the 3B and 7B Omni thinkers: both heads wider than the tokenizer, not alike."""
    pair = copy_pair(omni, tmp_path)
    cfg = json.loads((pair["edge"] / "config.json").read_text())
    cfg["text_config"]["vocab_size"] = 152
    (pair["edge"] / "config.json").write_text(json.dumps(cfg))
    rep = check_folders(pair["edge"], pair["cloud"])
    assert [(f["code"], f["severity"]) for f in rep["checks"]] == [("vocab_widths", "info")]
    assert "edge 152, cloud 160" in rep["checks"][0]["detail"] and "differ" in rep["checks"][0]["detail"]
