"""A correct SAMPLING loop with an EAGLE-style draft head (head_correct.py + the rejection rule).

Each draft x is sampled from q = softmax(head logits / T) (the cloud's LM head on the head's
predicted features), accepted with probability min(1, p(x) / q(x)) where p = softmax(cloud / T);
on the first rejection the cloud's token is drawn from norm(max(0, p - q)), after a fully
accepted block the bonus from p. Exact: distributed as sampling the cloud at T. Record it with
`--set temperature=0.7 --set verify=sampling`. head_raw_q.py is this loop with q taken from the
raw logits (transformers #47932).
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


def draft_q(logits, temperature):
    """The distribution the draft is sampled from, and the one the rule is given."""
    q = torch.softmax(logits.float() / temperature, -1)
    return q, q


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), drafter=None,
           temperature=0.7, seed=0):
    gen = torch.Generator().manual_seed(seed)
    head, lm_head = drafter, cloud.get_output_embeddings()
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()
    n_prompt = len(seq)
    cloud_cache, head_cache = DynamicCache(), DynamicCache()
    logits, feats = cloud_forward(cloud, cloud_cache, seq)       # the cloud's features first
    seq.append(int(torch.multinomial(torch.softmax(logits[-1].float() / temperature, -1), 1,
                                     generator=gen)))
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
        draft, qs = [], []
        for i in range(k):
            drawn, q = draft_q(lm_head(own), temperature)
            tok = int(torch.multinomial(drawn, 1, generator=gen))
            draft.append(tok)
            qs.append(q)
            if tok in stop_ids or i == k - 1:
                break
            own = head_forward(head, cloud, head_cache, own[None], [tok])[-1]

        # 2. verify in one cloud forward; its hidden states are the features of these positions
        logits, new = cloud_forward(cloud, cloud_cache, seq[feats.shape[0]:] + draft)
        ps = torch.softmax(logits[-(len(draft) + 1):].float() / temperature, -1)
        n_ok = 0
        while n_ok < len(draft):
            x = draft[n_ok]
            if float(torch.rand((), generator=gen)) >= float(ps[n_ok, x] / qs[n_ok][x]):
                break
            n_ok += 1
        if n_ok < len(draft):                   # correction from the residual max(0, p - q)
            residual = (ps[n_ok] - qs[n_ok]).clamp_min(0)
            extra = int(torch.multinomial(residual / residual.sum(), 1, generator=gen))
        else:                                   # bonus from p
            extra = int(torch.multinomial(ps[n_ok], 1, generator=gen))

        # 3. roll back: the cloud to what is committed; the head to the last position it was
        #    fed with the cloud's features (its drafts were fed with its own)
        keep = base + n_ok
        feats = torch.cat([feats, new])[:keep]
        rollback(cloud_cache, keep)
        rollback(head_cache, base)

        for tok in draft[:n_ok] + [extra]:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
