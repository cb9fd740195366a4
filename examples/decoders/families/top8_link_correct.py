"""A cloud behind a TOP-8 LINK (issue 56): the verifier sends only the cloud's top-8.

`../sampling_correct.py` (Leviathan et al. 2023) where the link from the cloud carries only its
top-8 logits per row: p is the cloud's distribution restricted to its top-8 and renormalised
(transformers' `top_k=8` on the target). Exact for that p: the output is distributed as sampling
the cloud with top-k 8 at temperature T. Declare it: `--set temperature=0.8 --set verify=sampling
--set target_top_k=8`.
"""
import torch
from transformers import DynamicCache


def forward(model, cache, ids):
    """Feed `ids` right after what `cache` holds; returns their [n, V] next-token logits."""
    start = cache.get_seq_length()
    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    positions = torch.arange(start, start + len(ids), device=model.device).unsqueeze(0)
    out = model(input_ids=x, past_key_values=cache, position_ids=positions, use_cache=True)
    return out.logits[0]


def rollback(cache, keep):
    """Drop everything after the first `keep` positions (transformers 5: crop(-n_removed))."""
    drop = cache.get_seq_length() - keep
    if drop > 0:
        cache.crop(-drop)


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(),
           temperature=0.7, seed=0):
    gen = torch.Generator().manual_seed(seed)
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()                 # committed sequence: prompt + generated
    n_prompt = len(seq)
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    edge_seen = cloud_seen = 0                  # how many tokens of seq each cache holds

    while True:
        # 1. draft: the edge samples k tokens from q = softmax(logits / T)
        draft, qs = [], []
        feed = seq[edge_seen:]
        for _ in range(k):
            q = torch.softmax(forward(edge, edge_cache, feed)[-1].float() / temperature, -1)
            tok = int(torch.multinomial(q, 1, generator=gen))
            edge_seen += len(feed)
            draft.append(tok)
            qs.append(q)
            if tok in stop_ids:
                break
            feed = [tok]

        # 2. verify: one cloud forward over its unseen tokens and the whole block
        logits = forward(cloud, cloud_cache, seq[cloud_seen:] + draft)
        rows = logits[-(len(draft) + 1):].float()
        top = rows.topk(8, -1)                  # all the link carries: the cloud's top-8
        rows = torch.full_like(rows, float("-inf")).scatter(-1, top.indices, top.values)
        ps = torch.softmax(rows / temperature, -1)

        # 3. accept draft x with probability min(1, p(x) / q(x)); stop at the first rejection
        n_ok = 0
        while n_ok < len(draft):
            x = draft[n_ok]
            if float(torch.rand((), generator=gen)) < float(ps[n_ok, x] / qs[n_ok][x]):
                n_ok += 1
            else:
                break
        if n_ok < len(draft):                   # correction from the residual max(0, p - q)
            residual = (ps[n_ok] - qs[n_ok]).clamp_min(0)
            extra = int(torch.multinomial(residual / residual.sum(), 1, generator=gen))
        else:                                   # bonus from p
            extra = int(torch.multinomial(ps[n_ok], 1, generator=gen))
        new = draft[:n_ok] + [extra]

        # 4. roll both caches back to what is really committed
        keep = len(seq) + n_ok
        rollback(cloud_cache, keep)
        rollback(edge_cache, keep)
        cloud_seen, edge_seen = keep, min(edge_seen, keep)

        # 5. commit token by token; stop on a stop id or the length limit
        for tok in new:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
