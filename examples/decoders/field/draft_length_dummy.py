"""`draft_length_limit.py` as vLLM did it (#58080): past the drafter's limit the loop still
proposes k drafts, dummy token 0 (BUG lines), and the cloud verifies them every round. The output
stays the cloud's (a dummy is accepted only where the cloud chose 0), but from the limit on every
round drafts for nothing and the cloud scores k dead slots per forward.

The correct twin: a drafter with a length limit shorter than the target's, past which the loop
stops drafting and the cloud decodes alone.

Source: vllm-project/vllm #58080 ("length gate + dummy-0 drafts silently kill speculative
acceptance beyond the draft's max_model_len", gpu_model_runner `_input_fits_in_drafter`) and
#52873; no code copied, the loop is written here. Licence of this file: the project's.
DRAFT_MAX_LEN stands for the drafter's max_model_len (the demo prompt is 54 ids: the limit is
reached after 14 output tokens). Greedy by default; `temperature > 0`: Leviathan/Chen.
"""
import torch
from transformers import DynamicCache

DRAFT_MAX_LEN = 68
DUMMY = 0                                   # BUG: vLLM's placeholder draft id


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
        return [DUMMY] * k, [None] * k, edge_seen   # BUG: dummy drafts, verified anyway
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
            while n_ok < len(draft) and float(torch.rand((), generator=gen)) < (
                    float(ps[n_ok, draft[n_ok]] / qs[n_ok][draft[n_ok]]) if qs[n_ok] is not None
                    else float(ps[n_ok, draft[n_ok]])):                 # a dummy: q is one-hot
                n_ok += 1
            dist = ps[n_ok].clone()
            if n_ok < len(draft) and qs[n_ok] is not None:
                dist = (ps[n_ok] - qs[n_ok]).clamp_min(0)
            elif n_ok < len(draft):
                dist[draft[n_ok]] = 0                # one-hot q: the residual is p without it
            extra = int(torch.multinomial(dist / dist.sum(), 1, generator=gen))
        keep = len(seq) + n_ok
        rollback(cloud_cache, keep)
        rollback(edge_cache, keep)
        cloud_seen, edge_seen = keep, min(edge_seen, keep)
        for tok in draft[:n_ok] + [extra]:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
