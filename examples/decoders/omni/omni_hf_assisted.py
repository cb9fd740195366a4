"""Hugging Face assisted generation on two Qwen2.5-Omni thinkers: `cloud.generate(...,
assistant_model=edge)` with the audio features (transformers' own speculative decoding, greedy).

The processor's `input_features` / `feature_attention_mask` go to generate() as model kwargs;
assisted generation hands them to the assistant's generate() too, and both thinkers compute
their mrope positions and rope delta themselves (4-row position_ids: the text row on top of the
three mrope rows). HF reads the draft length from the ASSISTANT's generation_config, so k is set
there for the call (as in ../wild/hf_assisted.py). Output equals `cloud.generate(...)` greedy.
"""
import contextlib

import torch


@contextlib.contextmanager
def assistant_config(edge, k):
    cfg = edge.generation_config
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
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), model_inputs=None):
    stops = [int(s) for s in stop_ids]
    with assistant_config(edge, k):
        out = cloud.generate(input_ids, attention_mask=torch.ones_like(input_ids), **(model_inputs or {}),
                             assistant_model=edge, do_sample=False, max_new_tokens=max_new_tokens,
                             eos_token_id=stops or None, pad_token_id=stops[0] if stops else None)
    return out[0, input_ids.shape[1]:].tolist()
