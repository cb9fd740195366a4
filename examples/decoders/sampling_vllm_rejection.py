"""A correct sampling loop with vLLM-style rejection sampling (after vllm/v1/sample/rejection_sampler.py).

The verification step is written the way vLLM's RejectionSampler does it, batched over the
block: one uniform per draft drawn at once, accepted while u < p(x) / q(x); the recovered token
at the first rejection drawn from norm(max(0, p - q)) by the exponential race vLLM uses
(argmax of residual / Exp(1) noise); the bonus from p the same way. Exact at any temperature
(issue 36: the pooled temperature check must stay quiet on it).
"""
import torch
from transformers import DynamicCache


def forward(model, cache, ids):
    start = cache.get_seq_length()
    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    positions = torch.arange(start, start + len(ids), device=model.device).unsqueeze(0)
    return model(input_ids=x, past_key_values=cache, position_ids=positions, use_cache=True).logits[0]


def race(probs, gen):
    """A draw from `probs` (unnormalised is fine) by vLLM's exponential race."""
    q = torch.empty_like(probs).exponential_(generator=gen)
    return int((probs / q).argmax())


def rejection_sample(draft, q_draft, p_target, gen):
    """vLLM's rule for one request: returns the accepted drafts and one recovered/bonus token."""
    n = len(draft)
    idx = torch.arange(n)
    ids = torch.tensor(draft)
    u = torch.rand(n, generator=gen, dtype=torch.float64)
    ratio = (p_target[idx, ids].double() / q_draft[idx, ids].double())
    ok = (u < ratio).tolist()
    n_ok = ok.index(False) if False in ok else n
    if n_ok < n:
        extra = race((p_target[n_ok] - q_draft[n_ok]).clamp_min(0), gen)
    else:
        extra = race(p_target[n], gen)
    return draft[:n_ok], extra


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(),
           temperature=1.0, seed=0):
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
            tok = race(q, gen)
            edge_seen += len(feed)
            draft.append(tok)
            qs.append(q)
            if tok in stop_ids:
                break
            feed = [tok]
        logits = forward(cloud, cloud_cache, seq[cloud_seen:] + draft)
        ps = torch.softmax(logits[-(len(draft) + 1):].float() / temperature, -1)
        accepted, extra = rejection_sample(draft, torch.stack(qs), ps, gen)
        keep = len(seq) + len(accepted)
        for cache in (cloud_cache, edge_cache):
            if cache.get_seq_length() > keep:        # transformers 5: crop(-n_removed)
                cache.crop(keep - cache.get_seq_length())
        cloud_seen, edge_seen = keep, min(edge_seen, keep)
        for tok in accepted + [extra]:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
