"""Hugging Face self-speculative decoding: `cloud.generate(assistant_early_exit=n)`.

The cloud drafts with its own first `n` decoder layers (transformers' EarlyExitCandidateGenerator
sets `config.num_hidden_layers = n` on the same module for the drafting calls, with its own
cache), then scores the candidates with all layers. The edge is not used. Exact: the output
equals the cloud's greedy decode (the demo cloud was not trained for early exit, so acceptance is
low). Recorded, the partial-depth forwards of the cloud are drafts, not verdicts
(`recording["drafter"] == "self"`).
"""
import contextlib

import torch


@contextlib.contextmanager
def draft_length(model, k):
    """The candidate generator reads the draft length from the (assistant = cloud) model's
    generation_config: a constant k for this call, restored afterwards."""
    cfg = model.generation_config
    keep = {n: getattr(cfg, n, None) for n in
            ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold")}
    cfg.num_assistant_tokens, cfg.num_assistant_tokens_schedule = k, "constant"
    cfg.assistant_confidence_threshold = 0.0
    try:
        yield
    finally:
        for n, v in keep.items():
            setattr(cfg, n, v)


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(),
           exit_layer=4, **kw):
    stops = [int(s) for s in stop_ids]
    with draft_length(cloud, k):
        out = cloud.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                             assistant_early_exit=exit_layer, do_sample=False,
                             max_new_tokens=max_new_tokens, eos_token_id=stops or None,
                             pad_token_id=stops[0] if stops else None)
    return out[0, input_ids.shape[1]:].tolist()
