"""EARLY-EXIT self-speculation written by hand, with a BUG (issue 56): the cloud drafts with its own first
`exit_layer` decoder layers (its final norm and head on the shallow hidden state), then verifies
the block with all its layers. The edge is not used (`drafter: self`).

The shallow drafts keep their own cache (the first layers' keys and values), cropped after every
round like the full one in `early_exit_correct.py`. The BUG (`# BUG` lines): the shallow cache is
never cropped, so the drafting layers keep attending to the rejected drafts of earlier rounds
(a stale shallow cache). The output is still the cloud's; drafts are made from a wrong context.
"""
import contextlib

import torch
from transformers import DynamicCache


def forward(model, cache, ids):
    start = cache.get_seq_length()
    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    pos = torch.arange(start, start + len(ids), device=model.device).unsqueeze(0)
    return model(input_ids=x, past_key_values=cache, position_ids=pos, use_cache=True).logits[0]


def rollback(cache, keep):
    drop = cache.get_seq_length() - keep
    if drop > 0:
        cache.crop(-drop)          # transformers 5: crop(-n_removed)


@contextlib.contextmanager
def shallow(model, n):
    """Run only the first n decoder layers (the model reads config.num_hidden_layers)."""
    full = model.config.num_hidden_layers
    model.config.num_hidden_layers = n
    try:
        yield
    finally:
        model.config.num_hidden_layers = full


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(),
           exit_layer=4):
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()
    n_prompt = len(seq)
    draft_cache, cloud_cache = DynamicCache(), DynamicCache()
    draft_seen = cloud_seen = 0
    while True:
        draft, feed = [], seq[draft_seen:]
        with shallow(cloud, exit_layer):
            for _ in range(k):
                tok = int(forward(cloud, draft_cache, feed)[-1].argmax())
                draft_seen += len(feed)
                draft.append(tok)
                if tok in stop_ids:
                    break
                feed = [tok]
        logits = forward(cloud, cloud_cache, seq[cloud_seen:] + draft)
        target = logits[-(len(draft) + 1):].argmax(-1).tolist()
        n_ok = 0
        while n_ok < len(draft) and draft[n_ok] == target[n_ok]:
            n_ok += 1
        new = draft[:n_ok] + [target[n_ok]]
        keep = len(seq) + n_ok
        rollback(cloud_cache, keep)
        # BUG: the shallow cache is not cropped: its rejected drafts stay in it
        cloud_seen = draft_seen = keep  # BUG
        for tok in new:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
