"""Bug: the repetition penalty is applied to the drafts only (the draft logits are penalised,
the verify step compares with the cloud's plain argmax): the penalty never reaches the output.
`penalty_correct.py` is the twin. Record it with `--set target_repetition_penalty=1.3`.
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


def penalise(logits, seen, penalty):
    """HF's RepetitionPenaltyLogitsProcessor on one row."""
    idx = torch.tensor(sorted(set(seen)), dtype=torch.long)
    s = logits[idx]
    logits[idx] = torch.where(s < 0, s * penalty, s / penalty)
    return logits


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(),
           target_repetition_penalty=1.3):
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()                 # committed sequence: prompt + generated
    n_prompt = len(seq)
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    edge_seen = cloud_seen = 0                  # how many tokens of seq each cache holds

    while True:
        # 1. draft: the edge proposes k tokens greedily from penalised logits
        draft, feed = [], seq[edge_seen:]
        for _ in range(k):
            row = forward(edge, edge_cache, feed)[-1].float()
            tok = int(penalise(row, seq + draft, target_repetition_penalty).argmax())  # BUG: draft only
            edge_seen += len(feed)
            draft.append(tok)
            if tok in stop_ids:
                break
            feed = [tok]

        # 2. verify: one cloud forward; slot j's choice is the penalised argmax given seq + draft[:j]
        logits = forward(cloud, cloud_cache, seq[cloud_seen:] + draft)[-(len(draft) + 1):].float()
        target = logits.argmax(-1).tolist()     # the target is never penalised

        # 3. accept while the draft agrees; then the cloud's token (correction or bonus)
        n_ok = 0
        while n_ok < len(draft) and draft[n_ok] == target[n_ok]:
            n_ok += 1
        new = draft[:n_ok] + [target[n_ok]]

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
