"""A drafter fed a SLIDING WINDOW of the committed text: each round the edge gets a fresh cache
and the last W committed ids, positions 0..W-1 (issue 48, item 2: a common answer to a drafter
whose context is shorter than the target's).

Source: the pattern of vLLM's drafter input gate and sliding-window drafters discussed in
vllm-project/vllm #58080 / #57941 (a drafter whose window is shorter than the target's context);
no code copied, the loop is written here. Licence of this file: the project's.

Correct: the cloud verifies every draft against the whole committed text, so the output is the
cloud's own (greedy exactly; sampling with min(1, p/q) and the residual, q the windowed edge's).
A consistent window is a layout, not a bug. Its buggy twin is `window_drafter_lagging.py`.
"""
import torch
from transformers import DynamicCache

WINDOW = 32


def forward(model, cache, ids, start=None):
    start = cache.get_seq_length() if start is None else start
    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    pos = torch.arange(start, start + len(ids), device=model.device).unsqueeze(0)
    return model(input_ids=x, past_key_values=cache, position_ids=pos, use_cache=True).logits[0]


def window(seq, w):
    return seq[-w:]


def pick(logits, temperature, gen):
    if not temperature:
        return int(logits.argmax()), None
    q = torch.softmax(logits.float() / temperature, -1)
    return int(torch.multinomial(q, 1, generator=gen)), q


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(),
           temperature=0.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()
    n_prompt = len(seq)
    cloud_cache, cloud_seen = DynamicCache(), 0
    while True:
        edge_cache = DynamicCache()                       # a fresh window every round
        draft, qs, feed = [], [], window(seq, WINDOW)
        for _ in range(k):
            tok, q = pick(forward(edge, edge_cache, feed)[-1], temperature, gen)
            draft.append(tok)
            qs.append(q)
            if tok in stop_ids:
                break
            feed = [tok]
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
        cloud_seen = len(seq) + n_ok
        if cloud_cache.get_seq_length() > cloud_seen:
            cloud_cache.crop(cloud_seen - cloud_cache.get_seq_length())
        for tok in draft[:n_ok] + [extra]:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
