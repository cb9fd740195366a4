"""A three-level CASCADE (issue 56): an n-gram lookup drafts for the edge, the edge drafts for
the cloud.

Each round the n-gram level proposes up to k ids (what followed the last id where it
occurred before); the edge scores them in one forward and keeps them while they are its own
argmax, puts its own token at the first disagreement and drafts on greedily up to k ids; the
cloud verifies that block in one forward, as in `correct.py`. Greedy and exact: the output is the
cloud's greedy decode. `cascade_unseen_correction.py` is the bug: the edge's correction of the
n-gram is committed as if the cloud had accepted it.
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


def ngram(seq, k, n=1):
    """Up to k ids that followed the latest earlier occurrence of the last n ids."""
    tail = seq[-n:]
    for i in range(len(seq) - n - 1, -1, -1):
        if seq[i:i + n] == tail:
            return seq[i + n:i + n + k]
    return []


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()
    n_prompt = len(seq)
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    edge_seen = cloud_seen = 0
    while True:
        # 1. the n-gram level proposes, the edge checks its proposals in one forward
        guess = ngram(seq, k)
        rows = forward(edge, edge_cache, seq[edge_seen:] + guess)[-(len(guess) + 1):]
        edge_seen = len(seq) + len(guess)
        mine = rows.argmax(-1).tolist()
        g = 0
        while g < len(guess) and guess[g] == mine[g] and guess[g] not in stop_ids:
            g += 1
        draft = guess[:g] + [mine[g]]       # the edge's own token after the kept proposals
        fixed = g                           # where the edge's first own token is
        rollback(edge_cache, len(seq) + g)
        edge_seen = len(seq) + g
        # 2. the edge drafts on from its own token
        while len(draft) < k and draft[-1] not in stop_ids:
            draft.append(int(forward(edge, edge_cache, [draft[-1]])[-1].argmax()))
            edge_seen += 1
        # 3. the cloud verifies the whole block
        logits = forward(cloud, cloud_cache, seq[cloud_seen:] + draft)
        target = logits[-(len(draft) + 1):].argmax(-1).tolist()
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
