"""The Qwen2.5-Omni backend on CPU with tiny random-init thinkers saved as real HF folders.

Everything goes through the real loading code (config checks, processor, from_pretrained with
safetensors), the real Omni processor audio path (Whisper features, audio-token expansion, chat
template) and the real decoder. The reference is the thinker's own `generate`.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from specdec_core import DecodeConfig
from specdec_core.audio.loading import load_audio
from specdec_core.backends import load_backend
from specdec_core.backends.omni import OmniBackend, OmniRunner
from specdec_core.backends.omni_loading import ENV_FORCE_CPU, HEADROOM_BYTES, count_parameters, memory_needed
from devtools.omni_tiny import (omni_processor, omni_tokenizer, perturb, save_folder,
                                save_published_layout, tiny_thinker, tiny_thinker_config)
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.errors import BackendError, ConfigError
from tiny import tiny_qwen2

ROOT = Path(__file__).resolve().parents[1]
CLOUD_VOCAB, SMALL_VOCAB = 160, 152      # both wider than the 149-token tokenizer, like 7B/3B
N = 24


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("omni")
    tok = omni_tokenizer()
    proc = omni_processor(tok)
    cfg = tiny_thinker_config(tok, CLOUD_VOCAB, hidden=64, layers=2, init=0.3)
    cloud = tiny_thinker(cfg, seed=1)
    edge = tiny_thinker(cfg, seed=1)
    perturb(edge, 0.02, seed=7)         # same architecture, partly disagreeing draft
    small = tiny_thinker(tiny_thinker_config(tok, SMALL_VOCAB, hidden=32, layers=1, init=0.3), seed=3)
    return {"cloud": save_folder(cloud, proc, base / "cloud"),
            "edge": save_folder(edge, proc, base / "edge"),
            "small": save_folder(small, proc, base / "small"),
            "base": base, "proc": proc}


@pytest.fixture(scope="module")
def backend(folders):
    return OmniBackend(edge_model=str(folders["edge"]), cloud_model=str(folders["cloud"]),
                       force_cpu=True, dtype=torch.float32)


@pytest.fixture(scope="module")
def clip():
    wavs = sorted((ROOT / "sample_audio").glob("*.wav"))
    if wavs:
        return load_audio(wavs[0])
    t = np.arange(int(1.5 * 16000)) / 16000
    return load_audio((16000, (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)))


def _cfg(**kw):
    base = dict(k=4, verify="greedy", stop_at_first_sentence=False, min_new_tokens=0,
                max_new_tokens=N, cache_check_every=1)
    return DecodeConfig.from_dict({**base, **kw})


def _generate(backend, prompt, **kw):
    ids = prompt.input_ids
    out = backend.cloud.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 **prompt.prefill_kwargs, do_sample=False, max_new_tokens=N,
                                 eos_token_id=backend.stop_ids, pad_token_id=backend.stop_ids[0],
                                 temperature=None, top_p=None, top_k=None, **kw)
    return out[0, ids.shape[1]:].tolist()


def _desyncs(trace):
    return [w for w in trace.warnings if w["kind"] == "cache_desync"]


def test_greedy_speculative_equals_thinker_generate_with_rollbacks(backend, clip):
    prompt = backend.build_inputs(clip, "detailed")
    trace = SpeculativeDecoder(backend, _cfg(), debug=True).run(prompt)
    ref = _generate(backend, prompt)
    assert len(ref) >= 8, "the reference stopped too early to exercise rollbacks"
    assert trace.token_ids == ref
    m = trace.metrics
    assert m["corrections"] > 0 and 0 < m["acceptance_rate"] < 1
    # every round compared cached edge logits with a cache-free recompute (audio included)
    assert not _desyncs(trace)


def test_concise_prompt_and_identical_draft_accepts_all(folders, clip):
    same = OmniBackend(edge_model=str(folders["cloud"]), cloud_model=str(folders["cloud"]),
                       force_cpu=True, dtype=torch.float32)
    assert same.edge is same.cloud        # one folder is loaded once
    prompt = same.build_inputs(clip, "concise")
    trace = SpeculativeDecoder(same, _cfg(k=5), debug=True).run(prompt)
    assert trace.token_ids == _generate(same, prompt)
    assert trace.metrics["acceptance_rate"] == 1.0 and trace.metrics["corrections"] == 0


def test_draft_with_smaller_vocabulary(folders, clip):
    b = OmniBackend(edge_model=str(folders["small"]), cloud_model=str(folders["cloud"]),
                    force_cpu=True, dtype=torch.float32)
    assert b.shared_vocab == SMALL_VOCAB
    prompt = b.build_inputs(clip, "detailed")
    trace = SpeculativeDecoder(b, _cfg(k=3), debug=True).run(prompt)
    # Ids past the shared vocabulary are padding rows in the real heads; the reference is the
    # cloud's greedy output on the shared vocabulary.
    ref = _generate(b, prompt, suppress_tokens=list(range(SMALL_VOCAB, CLOUD_VOCAB)))
    assert trace.token_ids == ref
    assert trace.metrics["corrections"] > 0 and not _desyncs(trace)


def test_runner_positions_survive_rollback(backend, clip):
    prompt = backend.build_inputs(clip, "detailed")
    r = OmniRunner(backend.cloud, vocab_size=backend.shared_vocab)
    r.prefill(prompt)
    plen = prompt.length
    pos = r.positions(plen - 3, 6)
    assert pos.shape == (3, 1, 6)
    assert pos[0, 0].tolist() == [plen - 3 + i + r.rope_delta for i in range(6)]
    r.feed([prompt.input_ids[0, -1].item(), 20, 21, 22, 23])
    r.crop(plen + 1)                             # drop 3 drafted tokens
    cached = r.feed([30, 31])[-1]
    fresh = r.recompute_last([20, 30, 31])
    assert r.cache_len() == r.seen == plen + 3
    assert torch.allclose(cached, fresh, atol=1e-4)
    r.prefill(prompt)                            # a new clip resets the cache and the delta
    assert r.seen == plen - 1 and r.cache_len() == plen - 1


def test_prompt_format(backend, clip):
    p = backend.build_inputs(clip, "detailed")
    text = p.info["prompt"]
    assert text.startswith("<|im_start|>system\nYou are Qwen, a virtual human developed by the "
                           "Qwen Team, Alibaba Group")
    assert "<|im_start|>user\n<|audio_bos|><|AUDIO|>×" in text and "30到70个汉字" in text
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    frames = int(p.prefill_kwargs["feature_attention_mask"].sum())
    assert p.info["audio_tokens"] == ((frames - 1) // 2 + 1 - 2) // 2 + 1 > 0
    assert backend.stop_ids == [backend.tokenizer.convert_tokens_to_ids(t)
                                for t in ("<|im_end|>", "<|endoftext|>")]
    assert "8到16个汉字" in backend.build_inputs(clip, "concise").info["prompt"]
    with pytest.raises(ConfigError, match="prompt_type"):
        backend.build_inputs(clip, "poem")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_refuses_cpu_unless_forced(folders, monkeypatch):
    monkeypatch.delenv(ENV_FORCE_CPU, raising=False)
    args = dict(edge_model=str(folders["edge"]), cloud_model=str(folders["cloud"]))
    with pytest.raises(BackendError, match="needs a CUDA GPU") as e:
        load_backend("omni", **args)
    assert "\n" not in str(e.value) and ENV_FORCE_CPU in str(e.value)
    monkeypatch.setenv(ENV_FORCE_CPU, "1")
    b = load_backend("omni", dtype=torch.float32, **args)
    assert b.device.type == "cpu" and b.shared_vocab == CLOUD_VOCAB


def test_clear_errors_for_bad_folders(folders, monkeypatch):
    base = folders["base"]
    qwen2 = base / "qwen2"
    tiny_qwen2(64).save_pretrained(qwen2)
    kw = dict(force_cpu=True, dtype=torch.float32)
    with pytest.raises(BackendError, match=r"edge model at .* is not a Qwen2.5-Omni thinker .*'qwen2'"):
        OmniBackend(edge_model=str(qwen2), cloud_model=str(folders["cloud"]), **kw)
    (base / "empty").mkdir(exist_ok=True)
    with pytest.raises(BackendError, match="no config.json"):
        OmniBackend(edge_model=str(folders["edge"]), cloud_model=str(base / "empty"), **kw)
    with pytest.raises(BackendError, match="cloud model not found"):
        OmniBackend(edge_model=str(folders["edge"]), cloud_model=str(base / "nope"), **kw)
    monkeypatch.delenv("SPECSCOPE_EDGE_MODEL", raising=False)
    with pytest.raises(BackendError, match="SPECSCOPE_EDGE_MODEL"):
        OmniBackend(cloud_model=str(folders["cloud"]), **kw)


def test_published_whole_model_layout_loads_the_thinker(folders, backend):
    """Hub folders hold the whole Omni model; only its thinker is loaded, weights intact."""
    path = save_published_layout(backend.cloud, folders["proc"], folders["base"] / "published")
    b = OmniBackend(edge_model=str(path), cloud_model=str(path), force_cpu=True,
                    dtype=torch.float32)
    want, got = backend.cloud.state_dict(), b.cloud.state_dict()
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)


def test_mismatched_tokenizers_are_refused(folders):
    foreign = omni_tokenizer(lead=("<|extra_0|>",))   # same tokens, every id shifted by one
    proc = omni_processor(foreign)
    edge = tiny_thinker(tiny_thinker_config(foreign, CLOUD_VOCAB), seed=5)
    path = save_folder(edge, proc, folders["base"] / "foreign")
    with pytest.raises(BackendError, match=r"tokenizers differ: <\|im_start\|> is id 1 for the cloud and 2"):
        OmniBackend(edge_model=str(path), cloud_model=str(folders["cloud"]), force_cpu=True,
                    dtype=torch.float32)


def test_memory_estimate_from_configs(backend):
    n = count_parameters(backend.cloud.config)
    assert n == sum(p.numel() for p in backend.cloud.parameters())
    need = memory_needed({"cloud": backend.cloud.config}, torch.bfloat16)
    assert need["total"] == 2 * n + HEADROOM_BYTES
    # the published 7B/3B thinker dims (scripts/gpu_check.py) give the known sizes
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    b7 = count_parameters(gpu_check.thinker_config("7B")) / 1e9
    b3 = count_parameters(gpu_check.thinker_config("3B")) / 1e9
    assert 8.5 < b7 < 9.3 and 4.2 < b3 < 5.0, (b7, b3)


def test_gpu_check_engine_agreement_names_the_first_divergence():
    # the GPU check's verdict on graphs vs eager (docs/gpu/): identical, or the first token apart
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    runs = ("cloud_loop", "sd_draft_eq_cloud", "sd_3b_7b", "sd_head")
    eager = {r: {"token_ids": [5, 6, 7, 8]} for r in runs}
    graphs = {r: {"token_ids": [5, 6, 7, 8]} for r in runs}
    graphs["sd_3b_7b"] = {"token_ids": [5, 6, 9, 8]}
    graphs["sd_head"] = {"token_ids": [5, 6, 7]}
    got = gpu_check.agreement({"eager": eager, "graphs": graphs})
    assert got["cloud_loop: graphs vs eager"] == {"identical": True, "first_divergence": None,
                                                  "tokens": [4, 4]}
    assert got["sd_3b_7b: graphs vs eager"]["first_divergence"] == 2
    assert got["sd_head: graphs vs eager"] == {"identical": False, "first_divergence": 3,
                                               "tokens": [4, 3]}


def test_gpu_record_check_compares_each_verdict_with_the_first_run():
    # scripts/gpu_record_check.py (docs/gpu/gpu_record_*): a run keeps the first run's verdict
    # only when it ran as the first did and raised the same ERROR codes (warnings may differ:
    # wall-clock findings on another machine)
    spec = importlib.util.spec_from_file_location("grc", ROOT / "scripts" / "gpu_record_check.py")
    grc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(grc)
    finding = lambda code, sev: {"code": code, "severity": sev}           # noqa: E731
    ok = {"ok": True, "token_ids": [1, 2], "findings": [finding("vocab_widths", "info")]}
    stale = {"ok": True, "token_ids": [1, 2], "findings": [finding("stale_cache", "error"),
                                                           finding("loop_overhead", "warning")]}
    row = lambda run, dec, res: grc.summary(run, dec, "a.wav", res, 1.0)  # noqa: E731
    rows = grc.compare([row("cpu:float32", "good.py", ok), row("cpu:float32", "bad.py", stale),
                        row("cuda:bfloat16", "good.py", {**ok, "findings": [finding("loop_overhead", "warning")]}),
                        row("cuda:bfloat16", "bad.py", {"ok": False, "error": "decoder failed: OOM"})])
    key = "same_errors_as_cpu:float32"
    assert [r[key] for r in rows] == [True, True, True, False]
    assert rows[1]["errors"] == ["stale_cache"] and rows[1]["warnings"] == ["loop_overhead"]
    assert rows[3]["tokens"] == 0 and rows[3]["error"] == "decoder failed: OOM"
