"""A GENERATING verifier at T > 0 with the exact rule (issue 56): the cloud produces its own
continuation, one forward per token (as `../field/verify_generates.py`), and each draft is judged
by Leviathan's rule on the cloud's row for that draft's context.

Draft i is accepted with probability min(1, p(x) / q(x)), p the cloud's row after the committed
text and the drafts before it, q the edge's. The cloud's rows are for its OWN tokens, so a row
is the draft's context only while the cloud's tokens equal the drafts: after accepting a draft
that differs from the cloud's token, the round ends there (nothing more is judged on a row of
another context). On a rejection the correction is drawn from norm(max(0, p - q)); after a whole
block the bonus is the cloud's own token. Exact: the output is distributed as sampling the cloud
at temperature T. Record it with `--set temperature=0.8 --set verify=sampling`.
`generating_top_n.py` is the lossy rule on the same verifier.
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


def common(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(),
           temperature=0.8, seed=0, top_n=5):
    gen = torch.Generator().manual_seed(seed)
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()
    n_prompt = len(seq)
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    edge_seen = cloud_seen = 0
    while True:
        draft, qs, feed = [], [], seq[edge_seen:]
        for _ in range(k):
            q = torch.softmax(forward(edge, edge_cache, feed)[-1].float() / temperature, -1)
            tok = int(torch.multinomial(q, 1, generator=gen))
            edge_seen += len(feed)
            draft.append(tok)
            qs.append(q)
            if tok in stop_ids:
                break
            feed = [tok]
        # the cloud generates len(draft) + 1 tokens of its own; ps[i]: its row before token i
        target, ps, feed = [], [], seq[cloud_seen:]
        for _ in range(len(draft) + 1):
            p = torch.softmax(forward(cloud, cloud_cache, feed)[-1].float() / temperature, -1)
            tok = int(torch.multinomial(p, 1, generator=gen))
            target.append(tok)
            ps.append(p)
            if tok in stop_ids:
                break
            feed = [tok]
        new = []
        for i, x in enumerate(draft[:len(target) - 1]):
            if float(torch.rand((), generator=gen)) < float(ps[i][x] / qs[i][x]):
                new.append(x)
                if x != target[i] or x in stop_ids:     # the next row is not this context's
                    break
            else:
                residual = (ps[i] - qs[i]).clamp_min(0)
                new.append(int(torch.multinomial(residual / residual.sum(), 1, generator=gen)))
                break
        else:
            new.append(target[len(new)])                # the cloud's own token after the block
        # each cache keeps the committed text and the part of its block that was committed
        cloud_seen = len(seq) + min(common(new, target), len(new) - 1)
        edge_seen = min(edge_seen, len(seq) + min(common(new, draft), len(new) - 1))
        rollback(cloud_cache, cloud_seen)
        rollback(edge_cache, edge_seen)
        for tok in new:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
