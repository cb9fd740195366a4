"""The recorder on Qwen2.5-Omni thinkers (issue 18 item 1): the tiny Omni folders written by
scripts/make_tiny_omni.py, loaded by the real Omni backend on CPU, the decoders in
examples/decoders/omni/ recorded through the real record CLI and its Python API. Heads are 160
rows for a 149-token tokenizer, as in every real Qwen pair; the reference is `thinker.generate`.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from specdec_core.api import prepare
from specdec_core.backends import load_backend
from specdec_core.decoding.config import DecodeConfig
from specdec_core.recorder import Recorder, analyze
from specdec_core.recorder.driver.clip import load_function, record_clip

ROOT = Path(__file__).resolve().parents[1]
OMNI = ROOT / "examples" / "decoders" / "omni"
CLIP = str(ROOT / "sample_audio" / "angry_01.wav")
N = 24
KNOBS = {"k": 4, "max_new_tokens": N, "temperature": 0.0, "verify": "greedy", "prompt_type": "detailed"}
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "SPECSCOPE_OMNI_FORCE_CPU": "1"}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny_omni")
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_omni.py"), str(out)],
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert p.returncode == 0, p.stderr
    paths = {"edge": out / "edge", "cloud": out / "cloud"}
    assert f"SPECSCOPE_EDGE_MODEL={paths['edge']}" in p.stdout
    return paths


@pytest.fixture(scope="module")
def backend(folders, monkeypatch_module):
    monkeypatch_module.setenv("SPECSCOPE_OMNI_FORCE_CPU", "1")
    return load_backend("omni", edge_model=str(folders["edge"]), cloud_model=str(folders["cloud"]))


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


@pytest.fixture(scope="module")
def prompt(backend):
    return prepare(backend, CLIP, DecodeConfig(prompt_type="detailed"))


def generate(backend, ids, model_inputs):
    out = backend.cloud.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **model_inputs,
                                 do_sample=False, max_new_tokens=N, eos_token_id=backend.stop_ids,
                                 pad_token_id=backend.stop_ids[0])
    return out[0, ids.shape[1]:].tolist()


def record(backend, target):
    fn, path = load_function(str(OMNI / target))
    return record_clip(fn, path, backend, CLIP, KNOBS)


def codes(res, severity=None):
    return {f["code"] for f in res["findings"] if severity in (None, f["severity"])}


def rebuilt(trace):
    """Every committed token has a verified origin, and some drafts were rejected."""
    sources = [t["source"] for t in trace["tokens"]]
    return (set(sources) <= {"accepted", "corrected", "bonus"} and "corrected" in sources
            and "accepted" in sources and all(r["verified"] for r in trace["rounds"]))


def test_make_tiny_omni_script_writes_a_pair_that_disagrees_partly(folders):
    for role in ("edge", "cloud"):
        assert {"config.json", "model.safetensors", "tokenizer.json",
                "preprocessor_config.json"} <= {p.name for p in folders[role].iterdir()}
    assert (folders["edge"] / "model.safetensors").read_bytes() != (folders["cloud"] / "model.safetensors").read_bytes()
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_tiny_omni.py")],
                       capture_output=True, text=True, env=ENV, timeout=120)
    assert p.returncode == 2 and p.stderr.startswith("usage:") and "Traceback" not in p.stderr


def test_correct_loop_through_the_cli_has_no_error_and_rebuilt_rounds(folders, tmp_path):
    out = tmp_path / "rec.json"
    p = subprocess.run([sys.executable, "-m", "specdec_core", "record", str(OMNI / "omni_correct.py"),
                        CLIP, "--backend", "omni", "--edge-model", str(folders["edge"]),
                        "--cloud-model", str(folders["cloud"]), "--set", f"max_new_tokens={N}",
                        "--reference", "--out", str(out)],
                       capture_output=True, text=True, env=ENV, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    res = json.loads(out.read_text())["results"][0]
    assert res["ok"] and codes(res, "error") == set() and codes(res, "warning") == set(), res["findings"]
    assert res["reference"]["matches"] and len(res["token_ids"]) == N      # = thinker.generate
    assert rebuilt(res["trace"])
    assert [f["code"] for f in res["findings"]] == ["vocab_widths"]         # 160-row heads, 149 ids
    rec = res["recording"]
    assert rec["vocab"] == {"tokenizer": 149, "edge": 160, "cloud": 160}
    s, e = rec["audio"]["span"]
    assert rec["audio"]["rope_delta"] == 0 and e - s > 10
    assert set(rec["audio"]["prefill"].values()) == {"input_features"}
    prefill = rec["forwards"][0]
    assert prefill["input_features"] and len(prefill["mrope"]) == 3 and prefill["mrope"][0][:3] == [0, 1, 2]


def test_no_rollback_gets_stale_cache(backend):
    res = record(backend, "omni_no_rollback.py")
    assert res["ok"] and "stale_cache" in codes(res, "error"), res["findings"]
    f = next(f for f in res["findings"] if f["code"] == "stale_cache")
    assert "never rolled back" in f["cause"]


def test_positions_reset_gets_position_error_naming_forward_and_delta(backend):
    res = record(backend, "omni_positions_reset.py")
    f = next(f for f in res["findings"] if f["code"] == "position_error")
    assert f["severity"] == "error" and "restarted at 0" in f["cause"]
    ev = f["evidence"]
    assert ev["rope_delta"] == 0 and ev["forward"] == 1 and ev["tokens"] == [0]
    assert "forward 1" in f["detail"] and "rope delta 0" in f["detail"]


def test_hf_assisted_generation_on_the_thinkers(backend, prompt):
    res = record(backend, "omni_hf_assisted.py")
    assert res["ok"] and codes(res, "error") == set(), res["findings"]
    assert res["token_ids"] == generate(backend, prompt.input_ids, prompt.prefill_kwargs)
    assert rebuilt(res["trace"])
    # transformers 5.23 does not hand input_features to the assistant: the edge drafts deaf
    # (timing findings read the wall clock: loop_overhead can appear on a loaded machine)
    assert codes(res, "warning") - {"loop_overhead", "recomputed_context"} == {"audio_missing"}
    f = next(f for f in res["findings"] if f["code"] == "audio_missing")
    assert f["evidence"]["model"] == "edge"


def _module(name):
    spec = importlib.util.spec_from_file_location(f"_omni_{name}", OMNI / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _api_record(backend, fn, ids, model_inputs):
    with Recorder(backend.edge, backend.cloud, backend.tokenizer, ids, backend.stop_ids, k=4,
                  max_new_tokens=N) as rec, torch.no_grad():
        out = fn(backend.edge, backend.cloud, backend.tokenizer, ids.clone(), k=4, max_new_tokens=N,
                 stop_ids=backend.stop_ids, model_inputs=model_inputs)
    recording = rec.finish(out)
    return out, recording, analyze(recording, backend.tokenizer)[1]


def test_inputs_embeds_audio_prefill_is_understood(backend, prompt):
    """The same correct loop whose first forward feeds the audio as inputs_embeds (built by hand
    from the audio tower): the recorder maps it back to the prompt ids and checks it the same."""
    mod = _module("omni_correct")
    by_ids = mod.forward

    def forward(model, cache, ids, mrope, audio):
        if cache.get_seq_length():
            return by_ids(model, cache, ids, mrope, audio)
        x = torch.tensor([ids])
        emb = model.get_input_embeddings()(x)
        feats = model.get_audio_features(audio["input_features"], audio["feature_attention_mask"],
                                         return_dict=True).last_hidden_state
        emb[x == model.config.audio_token_index] = feats.to(emb.dtype)
        out = model(inputs_embeds=emb, past_key_values=cache, use_cache=True,
                    position_ids=mod.positions(*mrope, 0, len(ids)))
        return out.logits[0]

    mod.forward = forward
    out, rec, found = _api_record(backend, mod.decode, prompt.input_ids, prompt.prefill_kwargs)
    assert out == generate(backend, prompt.input_ids, prompt.prefill_kwargs)
    P = prompt.input_ids[0].tolist()
    first = [f for f in rec["forwards"] if f["cache_len"] == 0]
    assert [f["model"] for f in first] == ["edge", "cloud"]
    # the edge's prefill is the prompt; the cloud's is the prompt and the first drafts
    assert all(f["inputs_embeds"] and f["ids"][:len(P)] == P for f in first)
    assert first[1]["ids"][len(P):] == rec["forwards"][1]["ids"] + rec["forwards"][2]["ids"] + \
        rec["forwards"][3]["ids"] + [rec["forwards"][3]["rows"]["argmax"][-1]]
    assert set(rec["audio"]["prefill"].values()) == {"inputs_embeds"}
    assert [f["code"] for f in found] == ["vocab_widths"], found


def test_non_zero_rope_delta_is_checked_and_a_dropped_delta_is_a_position_error(backend, prompt):
    """An image next to the audio makes the rope delta non-zero (-2 here): the correct loop is
    quiet and equals generate; the loop that drops the delta gets position_error naming it."""
    tok = backend.tokenizer
    ids = prompt.input_ids[0].tolist()
    at = ids.index(tok.convert_tokens_to_ids("<|audio_eos|>")) + 1
    image = [tok.convert_tokens_to_ids(t) for t in ["<|vision_bos|>"] + ["<|IMAGE|>"] * 4 + ["<|vision_eos|>"]]
    x = torch.tensor([ids[:at] + image + ids[at:]])
    g = torch.Generator().manual_seed(0)
    mi = dict(prompt.prefill_kwargs, pixel_values=torch.randn(4, 3 * 2 * 14 * 14, generator=g),
              image_grid_thw=torch.tensor([[1, 2, 2]]))
    out, rec, found = _api_record(backend, _module("omni_correct").decode, x, mi)
    assert rec["mrope"]["rope_delta"] == -2 and rec["audio"]["rope_delta"] == -2
    assert out == generate(backend, x, mi) and [f["code"] for f in found] == ["vocab_widths"]
    out, rec, found = _api_record(backend, _module("omni_positions_reset").decode_no_delta, x, mi)
    f = next(f for f in found if f["code"] == "position_error")
    assert "rope delta (-2) was dropped" in f["cause"] and f["evidence"]["rope_delta"] == -2
    assert f"forward {f['evidence']['forward']}" in f["detail"]
