"""A careful loop (issue 56): `logits_to_keep` so each forward returns only the rows it needs,
and the cache passed as `cache=` (the model's own keyword).

Drafting keeps 1 row per forward; the verify keeps k + 1 rows: the row before each draft (the
cloud's choice at that slot) and the row after the block (the bonus). Greedy and exact: the
output is the cloud's greedy decode. `logits_to_keep_short.py` is the bug: the verify keeps k
rows, one per draft, so every row is read one slot off.
"""
import torch
from transformers import DynamicCache


def forward(model, cache, ids, keep=1):
    """The last `keep` next-token rows after feeding `ids` right after what `cache` holds."""
    start = cache.get_seq_length()
    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    pos = torch.arange(start, start + len(ids), device=model.device).unsqueeze(0)
    return model(input_ids=x, cache=cache, position_ids=pos, use_cache=True,
                 logits_to_keep=keep).logits[0]


def rollback(cache, keep):
    drop = cache.get_seq_length() - keep
    if drop > 0:
        cache.crop(-drop)          # transformers 5: crop(-n_removed)


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()
    n_prompt = len(seq)
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    edge_seen = cloud_seen = 0
    while True:
        draft, feed = [], seq[edge_seen:]
        for _ in range(k):
            tok = int(forward(edge, edge_cache, feed)[-1].argmax())
            edge_seen += len(feed)
            draft.append(tok)
            if tok in stop_ids:
                break
            feed = [tok]
        # one row per draft slot and one for the bonus
        target = forward(cloud, cloud_cache, seq[cloud_seen:] + draft, len(draft) + 1).argmax(-1).tolist()
        n_ok = 0
        while n_ok < len(draft) and draft[n_ok] == target[n_ok]:
            n_ok += 1
        new = draft[:n_ok] + [target[n_ok]]
        keep = len(seq) + n_ok
        rollback(cloud_cache, keep)
        rollback(edge_cache, keep)
        cloud_seen, edge_seen = keep, min(edge_seen, keep)
        for tok in new:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
