"""A verifier that GENERATES instead of scoring: the cloud produces k + 1 tokens itself, one
forward each, and a draft is accepted while it equals the cloud's token (issue 48, item 1).

Source: the design of SpeculatoViz (github.com/samy19980109/Visualize-Speculative-Decoding,
README: the local draft model proposes a block, the cloud API returns its own continuation and
the drafts that match it are kept); no code copied, the loop is written here from that
description. Licence of this file: the project's.

The output is the cloud's own (greedy: exactly; sampling: the cloud's tokens are sampled from p
and every committed token is one of them, sample-and-match), so nothing is wrong in the text.
What is wrong is speed: the cloud makes one forward per token it produces (k + 1 per round:
its continuation whatever the drafts), more forwards than decoding with the cloud alone.
`diff verify_scores.py verify_generates.py` shows the change (# SLOW lines).
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
        draft, feed = [], seq[edge_seen:]
        for _ in range(k):
            tok, _ = pick(forward(edge, edge_cache, feed)[-1], temperature, gen)
            edge_seen += len(feed)
            draft.append(tok)
            if tok in stop_ids:
                break
            feed = [tok]
        # SLOW: the cloud generates len(draft) + 1 tokens of its own, one forward each (an API
        # asked for max_tokens = k + 1); drafts are kept while they equal its tokens
        target, feed = [], seq[cloud_seen:]
        for _ in range(len(draft) + 1):                                              # SLOW
            tok, _ = pick(forward(cloud, cloud_cache, feed)[-1], temperature, gen)   # SLOW
            target.append(tok)
            if tok in stop_ids:
                break
            feed = [tok]                                                             # SLOW
        n_ok = 0
        while n_ok < min(len(draft), len(target) - 1) and draft[n_ok] == target[n_ok]:
            n_ok += 1
        target = target[:n_ok + 1]
        keep = len(seq) + n_ok
        rollback(cloud_cache, keep)
        rollback(edge_cache, keep)
        cloud_seen, edge_seen = keep, min(edge_seen, keep)
        for tok in target:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
