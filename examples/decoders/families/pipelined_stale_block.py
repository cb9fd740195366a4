"""A PIPELINED edge with a BUG (issue 56): the edge drafts the next block while the cloud verifies.

The edge cannot wait for the verdict, so it drafts the next block optimistically, as if the whole
current block were accepted. When the cloud accepts the block and its bonus equals the first
optimistic draft, the rest of the optimistic block was drafted from exactly the context that is
now committed and is kept as the next block. The BUG (`# BUG` line, `diff pipelined_correct.py
pipelined_stale_block.py`): after a rejection the optimistic block is proposed anyway, though it
was drafted from a context that held the rejected drafts. The output is still the cloud's
greedy decode (the cloud corrects every wrong draft); acceptance collapses.
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


class Edge:
    """The edge with one cache; `held` is what the cache holds (ids)."""

    def __init__(self, model, stop_ids):
        self.model, self.cache, self.held, self.stop_ids = model, DynamicCache(), [], stop_ids

    def draft(self, ctx, n):
        """n greedy drafts after `ctx`; the cache is cropped to the longest prefix it shares."""
        keep = 0
        while keep < min(len(self.held), len(ctx) - 1) and self.held[keep] == ctx[keep]:
            keep += 1
        rollback(self.cache, keep)
        self.held, feed, out = self.held[:keep], ctx[keep:], []
        for _ in range(n):
            tok = int(forward(self.model, self.cache, feed)[-1].argmax())
            self.held += feed
            out.append(tok)
            if tok in self.stop_ids:
                break
            feed = [tok]
        return out


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()
    n_prompt = len(seq)
    drafter, cloud_cache, cloud_seen = Edge(edge, stop_ids), DynamicCache(), 0
    ready = None                               # a block drafted ahead, valid for `seq`
    while True:
        draft = ready if ready else drafter.draft(seq, k)
        # the edge drafts ahead (while the cloud verifies), assuming the whole block is accepted
        ahead = [] if draft[-1] in stop_ids else drafter.draft(seq + draft, k)
        logits = forward(cloud, cloud_cache, seq[cloud_seen:] + draft)
        target = logits[-(len(draft) + 1):].argmax(-1).tolist()
        n_ok = 0
        while n_ok < len(draft) and draft[n_ok] == target[n_ok]:
            n_ok += 1
        new = draft[:n_ok] + [target[n_ok]]
        # the optimistic block is valid only if the guess it started from is what the cloud said
        # BUG: after a rejection the block drafted over the rejected tokens is proposed next
        ready = ahead[1:] if n_ok == len(draft) and ahead[:1] == [target[n_ok]] else ahead  # BUG
        keep = len(seq) + n_ok
        rollback(cloud_cache, keep)
        cloud_seen = keep
        for tok in new:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
