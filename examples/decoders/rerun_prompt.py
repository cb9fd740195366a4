"""A correct greedy speculative loop that makes the models redo work every round.

`correct.py` without KV caches kept across rounds: every round the edge starts a NEW cache and
is fed the prompt and everything generated so far again before it drafts, and the cloud
verifies with `use_cache=False`, i.e. runs the whole sequence (prompt + generated + block) from
scratch. Written this way to avoid cache rollbacks altogether. The output is right (equal to
the cloud's greedy decode), but the models compute the same prefix over and over: the forwards
grow with the sequence and the recorder reports `recomputed_context`.

Fix: one cache per model for the whole decode, feed only what it has not seen, crop it after a
rejection (correct.py).
"""
import torch
from transformers import DynamicCache


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()
    n_prompt = len(seq)
    dev = edge.device

    while True:
        # 1. draft: a fresh cache every round, so the whole sequence is fed again first
        cache = DynamicCache()                                              # SLOW
        feed, draft = seq, []
        for _ in range(k):
            start = cache.get_seq_length()
            pos = torch.arange(start, start + len(feed), device=dev).unsqueeze(0)
            out = edge(input_ids=torch.tensor([feed], device=dev), past_key_values=cache,
                       position_ids=pos, use_cache=True)
            tok = int(out.logits[0, -1].argmax())
            draft.append(tok)
            if tok in stop_ids:
                break
            feed = [tok]

        # 2. verify: the cloud runs prompt + generated + block from scratch
        ids = seq + draft
        logits = cloud(input_ids=torch.tensor([ids], device=dev), use_cache=False).logits[0]  # SLOW
        target = logits[-(len(draft) + 1):].argmax(-1).tolist()

        n_ok = 0
        while n_ok < len(draft) and draft[n_ok] == target[n_ok]:
            n_ok += 1
        for tok in draft[:n_ok] + [target[n_ok]]:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
