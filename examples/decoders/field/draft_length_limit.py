"""A drafter with a length limit shorter than the target's: past it the loop stops drafting
and the cloud decodes alone, one token per forward (the correct twin of
`draft_length_dummy.py`).

Source: vllm-project/vllm #58080 ("length gate + dummy-0 drafts silently kill speculative
acceptance beyond the draft's max_model_len", gpu_model_runner `_input_fits_in_drafter`) and
#52873; no code copied, the loop is written here. Licence of this file: the project's.
DRAFT_MAX_LEN stands for the drafter's max_model_len (the demo prompt is 54 ids: the limit is
reached after 14 output tokens). Greedy by default; `temperature > 0`: Leviathan/Chen.
"""
import torch
from transformers import DynamicCache

DRAFT_MAX_LEN = 68


def forward(model, cache, ids):
    start = cache.get_seq_length()
    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    pos = torch.arange(start, start + len(ids), device=model.device).unsqueeze(0)
    return model(input_ids=x, past_key_values=cache, position_ids=pos, use_cache=True).logits[0]


def rollback(cache, keep):
    drop = cache.get_seq_length() - keep
    if drop > 0:
        cache.crop(-drop)          # transformers 5: crop(-n_removed)


def pick(logits, temperature, gen):
    if not temperature:
        return int(logits.argmax()), None
    q = torch.softmax(logits.float() / temperature, -1)
    return int(torch.multinomial(q, 1, generator=gen)), q


def propose(edge, edge_cache, seq, edge_seen, k, temperature, gen, stop_ids):
    """-> (drafts, their q, what the edge's cache holds); no drafts past the drafter's limit."""
    if len(seq) + k > DRAFT_MAX_LEN:
        return [], [], edge_seen           # the drafter cannot take this context: no drafts
    draft, qs, feed = [], [], seq[edge_seen:]
    for _ in range(k):
        tok, q = pick(forward(edge, edge_cache, feed)[-1], temperature, gen)
        edge_seen += len(feed)
        draft.append(tok)
        qs.append(q)
        if tok in stop_ids:
            break
        feed = [tok]
    return draft, qs, edge_seen


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(),
           temperature=0.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()
    n_prompt = len(seq)
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    edge_seen = cloud_seen = 0
    while True:
        draft, qs, edge_seen = propose(edge, edge_cache, seq, edge_seen, k, temperature, gen, stop_ids)
        logits = forward(cloud, cloud_cache, seq[cloud_seen:] + draft)[-(len(draft) + 1):]
        n_ok = 0
        if not temperature:
            target = logits.argmax(-1).tolist()
            while n_ok < len(draft) and draft[n_ok] == target[n_ok]:
                n_ok += 1
            extra = target[n_ok]
        else:
            ps = torch.softmax(logits.float() / temperature, -1)
            while n_ok < len(draft) and float(torch.rand((), generator=gen)) < float(
                    ps[n_ok, draft[n_ok]] / qs[n_ok][draft[n_ok]]):
                n_ok += 1
            dist = (ps[n_ok] - qs[n_ok]).clamp_min(0) if n_ok < len(draft) else ps[n_ok]
            extra = int(torch.multinomial(dist / dist.sum(), 1, generator=gen))
        keep = len(seq) + n_ok
        rollback(cloud_cache, keep)
        rollback(edge_cache, keep)
        cloud_seen, edge_seen = keep, min(edge_seen, keep)
        for tok in draft[:n_ok] + [extra]:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
