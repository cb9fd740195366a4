"""head_correct.py with the accepted drafts keeping the head's own features (vllm #14649).

After a verify the accepted drafts keep the features the head predicted for them while drafting
instead of the cloud's hidden states from the verify forward: they are re-fed to the head with
its own approximations. The text is unchanged (the cloud verifies every token); the head drafts
from worse features, so fewer drafts are accepted: no error anywhere, only a slower decode.
"""
import torch
from transformers import DynamicCache


def positions(start, n, device):
    return torch.arange(start, start + n, device=device).unsqueeze(0)


def cloud_forward(cloud, cache, ids):
    """Feed `ids` after what `cache` holds: ([n, V] logits, [n, hidden] last hidden states)."""
    start = cache.get_seq_length()
    x = torch.tensor([ids], dtype=torch.long, device=cloud.device)
    out = cloud(input_ids=x, past_key_values=cache, position_ids=positions(start, len(ids), x.device),
                use_cache=True, output_hidden_states=True)
    return out.logits[0], out.hidden_states[-1][0]


def head_forward(head, cloud, cache, feats, ids):
    """Feed tokens `ids` with the features of the positions before them: [n, hidden] predicted."""
    start = cache.get_seq_length()
    emb = cloud.get_input_embeddings()(torch.tensor([ids], dtype=torch.long, device=cloud.device))
    return head(feats[None], emb, cache=cache, position_ids=positions(start, len(ids), emb.device))[0]


def rollback(cache, keep):
    drop = cache.get_seq_length() - keep
    if drop > 0:
        cache.crop(-drop)


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), drafter=None):
    head, lm_head = drafter, cloud.get_output_embeddings()
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()
    n_prompt = len(seq)
    cloud_cache, head_cache = DynamicCache(), DynamicCache()
    logits, feats = cloud_forward(cloud, cloud_cache, seq)       # the cloud's features first
    seq.append(int(logits[-1].argmax()))
    if seq[-1] in stop_ids or max_new_tokens <= 1:
        return seq[n_prompt:]
    head_seen = 0
    zero = torch.zeros_like(feats[:1])

    while True:
        # 1. draft: feed the head what it has not seen, each token with the cloud's feature of
        #    the position before it; then chain on its own predicted features
        base = len(seq)
        before = torch.cat([zero, feats])[head_seen:base]
        own = head_forward(head, cloud, head_cache, before, seq[head_seen:])[-1]
        head_seen = base
        draft, mine = [], []          # drafts, and the head's own features of their positions
        for i in range(k):
            tok = int(lm_head(own).argmax())
            draft.append(tok)
            if tok in stop_ids or i == k - 1:
                break
            own = head_forward(head, cloud, head_cache, own[None], [tok])[-1]
            mine.append(own)

        # 2. verify in one cloud forward; its hidden states are the features of these positions
        logits, new = cloud_forward(cloud, cloud_cache, seq[feats.shape[0]:] + draft)
        target = logits[-(len(draft) + 1):].argmax(-1).tolist()
        n_ok = 0
        while n_ok < len(draft) and draft[n_ok] == target[n_ok]:
            n_ok += 1

        # 3. roll back: the cloud to what is committed; the head to the last position it was
        #    fed with the features of the positions before
        keep = base + n_ok
        feats = torch.cat([feats, new])[:keep]
        own_ok = min(n_ok, len(mine))            # BUG: the accepted drafts keep the head's own
        if own_ok:                               # features, not the cloud's from the verify
            feats[base:base + own_ok] = torch.stack(mine[:own_ok])
        rollback(cloud_cache, keep)
        rollback(head_cache, base)

        for tok in draft[:n_ok] + [target[n_ok]]:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
