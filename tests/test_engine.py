"""engine=static (issue 44): preallocated KV caches, fixed-width steps, rollback by write position.
Greedy output identical to engine=eager and to cloud-only on the demo pair (chains, static and
dynamic trees, the head drafter) and on tiny Omni thinkers; sampling draws the same tokens as
eager per seed and passes the losslessness test; graphs is refused off CUDA."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import StaticCache

from specdec_core import DecodeConfig
from specdec_core.audio.loading import load_audio
from specdec_core.backends import load_backend
from specdec_core.decoding.baseline import cloud_only
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.decoding.engine import StaticPlan, step_widths
from specdec_core.decoding.runner import ModelRunner
from specdec_core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
CLIPS = [ROOT / "sample_audio" / "heldout2" / n for n in ("angry_m4.wav", "neutral_m2.wav")]


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


@pytest.fixture(scope="module")
def prompts(demo):
    return [demo.build_inputs(load_audio(c), "detailed") for c in CLIPS]


def _cfg(**kw):
    return DecodeConfig.from_dict({"max_new_tokens": 32, "cache_check_every": 2, **kw})


def test_engine_knob_in_schema_cli_and_trace(demo, prompts):
    cfg = DecodeConfig.from_overrides(sets=["engine=static"])
    assert cfg.engine == "static" and DecodeConfig().engine == "eager"
    with pytest.raises(ConfigError, match="engine must be one of eager, static, graphs"):
        DecodeConfig.from_overrides(sets=["engine=fast"])
    tr = SpeculativeDecoder(demo, _cfg(engine="static", max_new_tokens=8)).run(prompts[0])
    assert tr.config["engine"] == "static"
    eng = tr.info["engine"]
    assert eng["engine"] == "static" and eng["kv_len"] > prompts[0].length + 8
    assert eng["widths"] == list(step_widths(_cfg())) and not eng["recorded"]


def test_graphs_refused_off_cuda_in_one_line(demo, prompts):
    with pytest.raises(ConfigError) as e:
        SpeculativeDecoder(demo, _cfg(engine="graphs")).run(prompts[0])
    assert "needs a CUDA device" in str(e.value) and "\n" not in str(e.value)


def test_static_runner_matches_eager_runner_and_rolls_back_by_write_position(demo, prompts):
    """Steps of 1, 2, 3 and k+1 tokens, a rollback, then new tokens over the stale slots:
    the padded static steps give the eager runner's logits and never crop the cache."""
    p, cfg = prompts[0], _cfg(k=4)
    eager, static = ModelRunner(demo.cloud), ModelRunner(demo.cloud)
    static.static = StaticPlan(cfg, p.length)
    for r in (eager, static):
        r.prefill(p)
    assert isinstance(static.cache, StaticCache)
    base = p.input_ids[0, -1].item()
    steps = [[base], [11, 12], [13, 14, 15], [16, 17, 18, 19, 20]]
    for ids in steps:
        a, b = eager.feed(ids), static.feed(ids)
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-5)
    keys = static.cache.layers[0].keys
    n = static.seen
    for r in (eager, static):
        r.crop(n - 6)                       # drop the last two steps
    assert static.cache.layers[0].keys is keys and keys.shape[-2] == static.static.kv_len
    assert static.cache_len() == n - 6 == eager.cache_len()
    for ids in ([30, 31, 32], [33]):        # written over the stale slots
        assert torch.allclose(eager.feed(ids), static.feed(ids), atol=1e-5)
    assert static.static.width(3) == 4 and static.static.width(1) == 1


@pytest.mark.parametrize("knobs", [{}, {"draft_tree": "static"}, {"draft_tree": "dynamic"},
                                   {"drafter": "head"}, {"drafter": "head", "draft_tree": "dynamic"}],
                         ids=["chain", "static_tree", "dynamic_tree", "head", "head_tree"])
def test_static_greedy_equals_eager_and_cloud_only(demo, prompts, knobs):
    for p in prompts if not knobs else prompts[len(knobs) % 2:][:1]:
        ref = cloud_only(demo, p, _cfg(**knobs))["token_ids"]
        got = {e: SpeculativeDecoder(demo, _cfg(engine=e, **knobs), debug=True).run(p) for e in ("eager", "static")}
        assert got["static"].token_ids == got["eager"].token_ids == ref
        assert not [w for w in got["static"].warnings if w["kind"] == "cache_desync"]
        assert [r.accepted for r in got["static"].rounds] == [r.accepted for r in got["eager"].rounds]
    assert len(ref) > 8


def test_recorded_static_run_is_judged_clean_and_says_it_ran_unpadded(demo):
    """`run --set engine=static` (recorded): the recorder's checks see no fault on a dynamic
    tree, and the trace says the steps ran at their own widths."""
    from specdec_core.api import run_clip

    r = run_clip(demo, CLIPS[1], _cfg(engine="static", draft_tree="dynamic", max_new_tokens=128),
                 baseline=True)
    assert r["ok"] and r["metrics"]["matches_baseline"] and r["trace"]["ended_by"] != "max_new_tokens"
    assert r["trace"]["diagnostics"] == []
    assert r["trace"]["info"]["engine"]["recorded"] and r["trace"]["info"]["engine"]["widths"] == []


def test_sampling_static_draws_what_eager_draws_and_stays_lossless():
    """Per seed the static engine commits eager's tokens (same logits, same generator), and its
    first two tokens follow the cloud's joint distribution (the test of test_decoder.py with
    fewer runs: N = 300, tolerance 0.12; the edge's own distribution is > 0.25 away)."""
    from test_decoder import _joint
    from tiny import PairBackend, char_tokenizer, tiny_qwen2

    small = char_tokenizer(chars=list("ab"))
    V_ = len(small)
    cloud = tiny_qwen2(V_, hidden=32, layers=2, seed=11, init=0.6)
    edge = tiny_qwen2(V_, hidden=16, layers=1, seed=12, init=0.6)
    backend = PairBackend(edge, cloud, small, stop_ids=[])
    prompt = backend.build_inputs(None, "detailed", ids=[4, 5, 4])
    kw = dict(k=2, verify="sampling", temperature=1.0, stop_at_first_sentence=False, min_new_tokens=0)
    for s in range(6):
        a, b = (SpeculativeDecoder(backend, _cfg(engine=e, seed=s, max_new_tokens=12, **kw)).run(prompt)
                for e in ("eager", "static"))
        assert a.token_ids == b.token_ids
    counts = torch.zeros(V_ * V_)
    for s in range(300):
        t = SpeculativeDecoder(backend, _cfg(engine="static", seed=s, max_new_tokens=2, **kw)).run(prompt).token_ids
        counts[t[0] * V_ + t[1]] += 1
    target, draft = _joint(cloud, [4, 5, 4], 1.0, V_), _joint(edge, [4, 5, 4], 1.0, V_)
    assert 0.5 * (target - draft).abs().sum() > 0.25
    assert 0.5 * (counts / 300 - target).abs().sum() < 0.12


def test_static_on_tiny_omni_thinkers_matches_eager_and_generate():
    """Omni: the audio prefill runs eager into the static cache, the steps carry 3-row mrope
    positions (text position + rope_delta); greedy equals eager and the thinker's generate."""
    from specdec_core.backends.omni import OmniBackend
    from devtools.omni_tiny import (omni_processor, omni_tokenizer, perturb, tiny_thinker,
                                    tiny_thinker_config)

    tok = omni_tokenizer()
    cfg = tiny_thinker_config(tok, 160, hidden=64, layers=2, init=0.3)
    cloud, edge = tiny_thinker(cfg, seed=1), tiny_thinker(cfg, seed=1)
    perturb(edge, 0.02, seed=7)
    b = OmniBackend(edge=edge, cloud=cloud, processor=omni_processor(tok))
    p = b.build_inputs(load_audio(CLIPS[0]), "detailed")
    knobs = dict(k=4, stop_at_first_sentence=False, min_new_tokens=0, max_new_tokens=20, cache_check_every=1)
    got = {e: SpeculativeDecoder(b, _cfg(engine=e, **knobs), debug=True).run(p) for e in ("eager", "static")}
    ids = p.input_ids
    ref = cloud.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **p.prefill_kwargs,
                         do_sample=False, max_new_tokens=20, eos_token_id=b.stop_ids,
                         pad_token_id=b.stop_ids[0], temperature=None, top_p=None, top_k=None)
    assert got["static"].token_ids == got["eager"].token_ids == ref[0, ids.shape[1]:].tolist()
    assert 0 < got["static"].metrics["acceptance_rate"] < 1          # rollbacks happened
    assert not [w for w in got["static"].warnings if w["kind"] == "cache_desync"]


def test_static_layers_keep_a_write_position_or_are_given_one(demo):
    """compat.static_cache: 5.24's static layers keep their own write position; 5.0's write where
    the forward's cache_position says (the probe tells them apart) and get one of ours. A layer
    with neither is refused with one line (docs/versions.md)."""
    from transformers.cache_utils import StaticLayer

    from specdec_core import compat

    native = "cumulative_length" in vars(StaticLayer(2))
    assert compat._writes_at_cache_position(StaticLayer) is not native
    cache = compat.static_cache(demo.cloud, 16)
    assert all(torch.is_tensor(layer.cumulative_length) for layer in cache.layers)
    assert all((type(layer) is StaticLayer) is native for layer in cache.layers)
    compat.set_write_position(cache, 5)
    assert [int(layer.cumulative_length) for layer in cache.layers] == [5] * len(cache.layers)

    class NoPosition:
        layers = [object()]
    with pytest.raises(ConfigError, match=r"^engine=static needs a transformers StaticCache") as e:
        compat.set_write_position(NoPosition(), 0)
    assert "\n" not in str(e.value)


def test_lean_layer_loop_is_used_on_the_demo_pair_and_not_under_hooks(demo, prompts):
    """The runner's layer loop (decoding/lean.py) passed its bit-for-bit check on both demo
    models; a model with a forward hook (a recording) gets the model's own call."""
    from specdec_core.decoding import lean
    from specdec_core.decoding.runner import causal_mask

    assert lean.usable(demo.edge, causal_mask) and lean.usable(demo.cloud, causal_mask)
    r = ModelRunner(demo.cloud)
    r.prefill(prompts[0])
    r.feed([prompts[0].input_ids[0, -1].item()])
    assert r._lean_ok({"attention_mask": {}})
    seen = []
    h = demo.cloud.register_forward_hook(lambda *a: seen.append(1))
    try:
        assert not r._lean_ok({"attention_mask": {}})
        r.feed([11, 12])
    finally:
        h.remove()
    assert seen == [1]


def test_round_device_time_only_on_cuda_and_drawn_as_a_line(demo, prompts):
    from components.timing_plot import timing_figure

    tr = SpeculativeDecoder(demo, _cfg(max_new_tokens=8)).run(prompts[0]).to_dict()
    assert all(r["device_s"] is None for r in tr["rounds"])          # a CPU: no CUDA events
    assert not [t for t in timing_figure(tr).data if "device" in (t.name or "")]
    for i, r in enumerate(tr["rounds"]):
        r["device_s"] = r["round_s"] * 0.5 if i else None            # as a GPU run records them
    line = [t for t in timing_figure(tr).data if "device" in (t.name or "")]
    assert len(line) == 1 and line[0].y[0] is None and line[0].y[1] > 0
