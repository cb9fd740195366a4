"""Edge drafts, the cloud SCORES the block in one forward (the correct twin of
`verify_generates.py`).

Class: a verifier that generates instead of scoring (issue 48, item 1). SpeculatoViz
(github.com/samy19980109/Visualize-Speculative-Decoding, README "How speculative decoding works";
no code copied, the loop is written here from its description) drafts locally and has the cloud
produce its own tokens for the block. This twin is the standard loop: one cloud forward over the
block scores every draft at once, so the cloud makes one forward per round.
Greedy by default; with `temperature > 0` the Leviathan/Chen rule (min(1, p/q), residual, bonus).
Licence of this file: the project's.
"""
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
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    edge_seen = cloud_seen = 0
    while True:
        draft, qs, feed = [], [], seq[edge_seen:]
        for _ in range(k):
            tok, q = pick(forward(edge, edge_cache, feed)[-1], temperature, gen)
            edge_seen += len(feed)
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
        keep = len(seq) + n_ok
        rollback(cloud_cache, keep)
        rollback(edge_cache, keep)
        cloud_seen, edge_seen = keep, min(edge_seen, keep)
        for tok in draft[:n_ok] + [extra]:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
