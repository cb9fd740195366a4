"""A ragged batch with a rectangular cache: rows accept different numbers of drafts, and each
row's rejected key/value tail is MASKED (issue 48, item 5). Its buggy twin is
`ragged_zeroed.py` (the tail zeroed instead: a zeroed key still adds e^0 to the softmax
denominator).

Source: the rollback described in Blaizzy/mlx-vlm #1962 ("Per-row tail zeroing in speculative
rollback leaves phantom KV attended") and its fix, PR #2113 ("Fix phantom KV in ragged batched
speculative rollback"); no code copied (theirs is MLX), the loop is written here for the demo
pair with a transformers DynamicCache. Licence of this file: the project's.

Layout: the prompts are left-padded in one [batch, columns] cache per model; every forward
appends the same number of columns to every row, and a 2D attention mask says which columns a
row really holds. A row's positions count its real columns. After a verify, the rejected drafts'
columns of each row are masked out of both caches (the drafter's one draft shorter); a row that
accepted every draft feeds its last draft again in a column the others mask. Greedy only: every
row equals its own greedy decode.
"""
import torch
from transformers import DynamicCache

ZERO_TAIL = False      # the twin's bug: zero the rejected tail's keys/values, leave it attended
PAD = 0


class Rows:
    """One model's rectangular batch cache: the columns' mask and each row's real length."""

    def __init__(self, model, batch):
        self.model, self.cache = model, DynamicCache()
        self.mask = torch.zeros(batch, 0, dtype=torch.bool, device=model.device)
        self.real = torch.zeros(batch, dtype=torch.long, device=model.device)

    def step(self, ids, keep):
        full = torch.cat([self.mask, keep], -1)
        pos = (self.real[:, None] + keep.long().cumsum(-1) - 1).clamp(min=0)
        logits = self.model(input_ids=ids, attention_mask=full.long(), position_ids=pos,
                            past_key_values=self.cache, use_cache=True).logits
        self.mask, self.real = full, self.real + keep.sum(-1)
        return logits

    def rollback(self, b, n):
        """Row b's last n columns were rejected drafts."""
        if n <= 0:
            return
        self.real[b] -= n
        if not ZERO_TAIL:
            self.mask[b, -n:] = False                   # masked: no longer attended
            return
        for layer in self.cache.layers:                 # zeroed, still attended
            layer.keys[b, :, -n:] = 0
            layer.values[b, :, -n:] = 0


def batch_prompts(prompt):
    """The clip's prompt in row 1, a shorter one built from it in row 0 (ragged: left padding)."""
    return [prompt[:2] + prompt[len(prompt) // 3:], prompt]


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(),
           temperature=0.0, clip_row=1):
    stops = {int(s) for s in stop_ids}
    prompts = batch_prompts(input_ids[0].tolist())
    B, T = len(prompts), max(len(p) for p in prompts)
    dev = cloud.device
    ids = torch.tensor([[PAD] * (T - len(p)) + p for p in prompts], device=dev)
    keep = torch.tensor([[False] * (T - len(p)) + [True] * len(p) for p in prompts], device=dev)
    E, C = Rows(edge, B), Rows(cloud, B)
    t = C.step(ids, keep)[:, -1].argmax(-1)             # each row's first token
    E.step(ids, keep)
    out = [[int(x)] for x in t]
    last = torch.full((B,), PAD, device=dev)            # a last draft the edge has not seen
    has_last = torch.zeros(B, dtype=torch.bool, device=dev)

    def done(b):
        return len(out[b]) >= max_new_tokens or bool(stops & set(out[b]))

    while not all(done(b) for b in range(B)):
        feed = torch.stack([last, t], -1)
        x = E.step(feed, torch.stack([has_last, torch.ones_like(has_last)], -1))[:, -1].argmax(-1)
        drafts = [x]
        for _ in range(k - 1):
            x = E.step(x[:, None], torch.ones(B, 1, dtype=torch.bool, device=dev))[:, -1].argmax(-1)
            drafts.append(x)
        D = torch.stack(drafts, -1)                                         # [B, k]
        target = C.step(torch.cat([t[:, None], D], -1),
                        torch.ones(B, k + 1, dtype=torch.bool, device=dev)).argmax(-1)
        for b in range(B):
            a = 0
            while a < k and int(D[b, a]) == int(target[b, a]):
                a += 1
            if not done(b):
                out[b] += [int(v) for v in D[b, :a]] + [int(target[b, a])]
            C.rollback(b, k - a)                        # the rejected drafts' columns
            E.rollback(b, k - 1 - min(a, k - 1))        # the edge never saw its last draft
            has_last[b] = a == k
            last[b] = D[b, k - 1] if a == k else PAD
            t[b] = target[b, a]
    row = out[clip_row][:max_new_tokens]
    for i, v in enumerate(row):
        if v in stops:
            return row[:i + 1]
    return row
