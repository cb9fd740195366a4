"""Adapter: Hugging Face assisted generation, `model.generate(assistant_model=...)`
(transformers' own speculative decoding; transformers is a dependency, nothing is copied).

Source: https://github.com/huggingface/transformers (the installed release, 5.23.0),
`GenerationMixin._assisted_decoding` and `AssistedCandidateGenerator`. Licence: Apache-2.0.

What it does: the assistant (edge) drafts `num_assistant_tokens` tokens with its own generate()
loop and DynamicCache, the main model (cloud) scores them in one forward, the caches are cropped
to what was accepted. Greedy here (`do_sample=False`); `decode_sampling` samples with the
declared temperature (record with `--set temperature=0.7 --set verify=sampling`).

Our reading: correct (greedy output equals the cloud's greedy decode). Known quirks, not
correctness bugs here: custom StoppingCriteria are checked on the last token of an accepted
block only (NOTES.md; stop ids via `eos_token_id` are handled per token); with sampling, each
assistant step applies the temperature twice (the main model's warper is passed in as a custom
processor and the assistant's generate() adds its own), so drafts are sampled at T² (0.49 for
0.7) — the recorder's pooled temperature check warns about it. q comes from the same processed
scores, so the output distribution should be unaffected; acceptance is lower.
"""
import contextlib

import torch


@contextlib.contextmanager
def assistant_config(edge, k):
    """HF reads the draft length from the ASSISTANT's generation_config (arguments given to the
    main model's generate() are ignored for it): set k and a constant schedule for the call,
    then restore. Not safe while other code decodes with the same edge model object."""
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


def _kw(max_new_tokens, stop_ids):
    stops = [int(s) for s in stop_ids]
    return dict(max_new_tokens=max_new_tokens, eos_token_id=stops or None,
                pad_token_id=stops[0] if stops else None)


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), **kw):
    with assistant_config(edge, k):
        out = cloud.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                             assistant_model=edge, do_sample=False, **_kw(max_new_tokens, stop_ids))
    return out[0, input_ids.shape[1]:].tolist()


@torch.no_grad()
def decode_sampling(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(),
                    temperature=1.0, **kw):
    with assistant_config(edge, k):
        out = cloud.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                             assistant_model=edge, do_sample=True, temperature=temperature,
                             top_k=0, top_p=1.0, **_kw(max_new_tokens, stop_ids))
    return out[0, input_ids.shape[1]:].tolist()
