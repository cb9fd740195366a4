"""Bug (a user's own): the cloud cache is cropped one token short after every round.

`rollback(cloud_cache, keep - 1)` drops one committed token more than it should, while the loop's
counter `cloud_seen` still says `keep`. The next verify feeds `seq[cloud_seen:]`, so the token at
position keep - 1 is never fed again: the cloud reads a context with one token missing, and its
positions start one early. The edge's cache is correct.
Fix: crop the cloud cache to `keep` (or set `cloud_seen` to what the cache holds).
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
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()                 # committed sequence: prompt + generated
    n_prompt = len(seq)
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    edge_seen = cloud_seen = 0                  # how many tokens of seq each cache holds

    while True:
        # 1. draft: the edge proposes k tokens greedily, feeding what its cache has not seen
        draft = []
        feed = seq[edge_seen:]
        for _ in range(k):
            tok = int(forward(edge, edge_cache, feed)[-1].argmax())
            edge_seen += len(feed)
            draft.append(tok)
            if tok in stop_ids:
                break
            feed = [tok]

        # 2. verify: one cloud forward over its unseen tokens and the whole block
        logits = forward(cloud, cloud_cache, seq[cloud_seen:] + draft)
        target = logits[-(len(draft) + 1):].argmax(-1).tolist()   # cloud's choice at each slot

        # 3. accept while the draft agrees; then the cloud's token (correction or bonus)
        n_ok = 0
        while n_ok < len(draft) and draft[n_ok] == target[n_ok]:
            n_ok += 1
        new = draft[:n_ok] + [target[n_ok]]

        # 4. roll both caches back to what is really committed
        keep = len(seq) + n_ok
        # BUG: the cloud cache is cropped one token short of the counter below
        rollback(cloud_cache, keep - 1)
        rollback(edge_cache, keep)
        cloud_seen, edge_seen = keep, min(edge_seen, keep)

        # 5. commit token by token; stop on a stop id or the length limit
        for tok in new:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
