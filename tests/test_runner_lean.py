"""The runner's lean path (issue 20 item 4): the prompt rides in the first forward and the causal
mask is handed to the model, with logits exactly those of the plain path."""
from __future__ import annotations

import torch

from specdec_core.backends.base import PromptInputs
from specdec_core.decoding.runner import ModelRunner, causal_mask, prepared_masks
from tiny import tiny_qwen2


class PlainRunner(ModelRunner):
    """The path before: a prefill forward of its own, the model builds its own masks."""
    merge_prefill = False

    def __init__(self, model):
        super().__init__(model)
        self._masks = False


def _steps(runner, prompt):
    runner.prefill(prompt)
    out = [runner.feed([9]), runner.feed([10, 11, 12], last_only=True), runner.feed([13])]
    runner.crop(runner.seen - 2)                 # a rejection: drop two positions
    out += [runner.feed([14, 15]), runner.feed([16])]
    return out


class SeparatePrefill(ModelRunner):
    merge_prefill = False


def test_lean_runner_gives_the_plain_logits_with_fewer_forwards():
    model = tiny_qwen2(40, hidden=32, layers=3, seed=3, init=0.3)
    assert prepared_masks(model)
    prompt = PromptInputs(torch.tensor([[1, 5, 6, 7, 8, 2]]))
    lean, plain = ModelRunner(model), PlainRunner(model)
    got, ref = _steps(lean, prompt), _steps(plain, prompt)
    # the runner's masks change nothing, bit for bit
    assert all(torch.equal(a, b) for a, b in zip(_steps(SeparatePrefill(model), prompt), ref))
    # the prompt in the first forward changes the float rounding of its keys and values (one
    # wider matmul, as in HF generate's own prefill), not the decisions
    assert all(torch.allclose(a, b, atol=1e-4) and torch.equal(a.argmax(-1), b.argmax(-1))
               for a, b in zip(got, ref))
    assert [x.shape[0] for x in got] == [1, 1, 1, 2, 1]
    assert lean.forwards == plain.forwards == 5   # decode forwards; the plain prefill is not one
    assert lean.seen == lean.cache_len() == plain.cache_len() and lean.history == plain.history


def test_masks_only_where_the_model_agrees():
    model = tiny_qwen2(40, seed=4)
    model.set_attn_implementation("eager")
    assert not prepared_masks(model)
    model.set_attn_implementation("sdpa")
    assert prepared_masks(model)
    hooked = tiny_qwen2(40, seed=5)
    h = hooked.register_forward_hook(lambda *a: None)
    assert not prepared_masks(hooked)          # a recording is never probed
    h.remove()
    assert causal_mask(0, 5, "cpu") is None and causal_mask(7, 1, "cpu") is None
    m = causal_mask(3, 2, "cpu")
    assert m.shape == (1, 1, 2, 5) and m[0, 0].tolist() == [[True] * 4 + [False], [True] * 5]


def test_one_probe_for_masks_and_the_layer_loop():
    """lean.same_logits is the one check both paths pass: the layer loop and the prepared masks
    agree with the model bit for bit, a call that differs by one ulp-sized nudge does not, and a
    call that raises reads as 'keep the model's own call'."""
    from specdec_core.compat import with_cache
    from specdec_core.decoding import lean

    model = tiny_qwen2(40, hidden=32, layers=2, seed=6, init=0.3)
    assert lean.usable(model, causal_mask) and prepared_masks(model)
    own = lambda ids, pos, cache, past: model(input_ids=ids, position_ids=pos, use_cache=True,  # noqa: E731
                                              **with_cache(model, cache)).logits[0]
    assert lean.same_logits(model, own)
    assert not lean.same_logits(model, lambda *a: own(*a) + 1e-3)
    assert not lean.same_logits(model, lambda *a: 1 / 0)
