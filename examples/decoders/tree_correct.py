"""A correct greedy TREE loop in the style of Medusa's public code: static tree buffers, one cloud
forward over the whole tree with a 4D attention mask and tree positions, posterior evaluation
over the root-to-leaf paths, and the accepted nodes' keys/values copied down in place.

The tree buffers, `evaluate_posterior` and the copy-down are adapted from Medusa
(https://github.com/FasterDecoding/Medusa, medusa/model/utils.py and kv_cache.py,
Apache-2.0, (c) the Medusa authors): `generate_medusa_buffers`, `evaluate_posterior` (greedy)
and `update_inference_inputs` shortened for one sequence and a `transformers.DynamicCache`.
Medusa's heads are replaced by the edge model: it drafts a greedy chain of `k` tokens and its
top-`TOPK` at each depth are the candidates of that depth (what Medusa's head d proposes).
Its output equals the cloud model's own greedy decode, token for token.

The files tree_*.py in this folder are this loop with one bug put in (`# BUG` marks it).
"""
import torch
from transformers import DynamicCache

TOPK = 3
# Medusa "choices": one node per path of ranks, (0, 1) = the 2nd candidate at depth 2 under
# the 1st at depth 1. A 10-node tree, depth 4.
CHOICES = [(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0), (0, 1, 0), (0, 0, 1),
           (0, 0, 0, 0)]


def tree_buffers(choices):
    """Medusa's generate_medusa_buffers: node 0 is the root (the last committed token)."""
    nodes = sorted(choices, key=lambda c: (len(c), c))
    n = len(nodes) + 1
    mask = torch.eye(n, dtype=torch.bool)
    mask[:, 0] = True
    index = {c: i + 1 for i, c in enumerate(nodes)}
    for c, i in index.items():
        for d in range(1, len(c)):
            mask[i, index[c[:d]]] = True                 # each node sees its ancestors
    depth = torch.tensor([0] + [len(c) for c in nodes])
    cand = [0] + [1 + (len(c) - 1) * TOPK + c[-1] for c in nodes]   # into [root, topk per depth]
    leaves = [c for c in nodes if not any(o[:len(c)] == c and len(o) > len(c) for o in nodes)]
    paths = [[0] + [index[c[:d]] for d in range(1, len(c) + 1)] for c in leaves]
    width = max(len(p) for p in paths)
    retrieve = torch.tensor([p + [-1] * (width - len(p)) for p in paths])
    return {"mask": mask, "depth": depth, "cand": torch.tensor(cand), "retrieve": retrieve}


def tree_mask(buf, past, dtype, device):
    """4D float mask [1, 1, n, past + n]: the committed prefix and the node's ancestors."""
    m = buf["mask"]
    full = torch.ones(m.shape[0], past + m.shape[0], dtype=torch.bool)
    full[:, past:] = m
    out = torch.zeros(full.shape, dtype=dtype)
    out.masked_fill_(~full, torch.finfo(dtype).min)
    return out[None, None].to(device)


def tree_positions(buf, past):
    return (buf["depth"] + past).unsqueeze(0)


def evaluate_posterior(logits, candidates, valid):
    """Medusa's greedy posterior: the path whose drafts match the cloud's argmax the longest."""
    ok = ((candidates[:, 1:] == logits[:, :-1].argmax(-1)) & valid[:, 1:]).int()
    lengths = torch.cumprod(ok, dim=1).sum(dim=1)
    best = int(lengths.argmax())
    return best, int(lengths[best])


def copy_down(cache, select, past):
    """Medusa's update_inference_inputs: the accepted nodes' KV into the slots after `past`."""
    for layer in cache.layers:
        for name in ("keys", "values"):
            t = getattr(layer, name)
            t[..., past:past + len(select), :] = t[..., select, :]
    rollback(cache, past + len(select))


def rollback(cache, keep):
    """Drop everything after the first `keep` positions (transformers 5: crop(-n_removed))."""
    drop = cache.get_seq_length() - keep
    if drop > 0:
        cache.crop(-drop)


def draft_chain(edge, cache, feed, depth):
    """The edge's greedy chain of `depth` tokens; returns [root, topk(d=1), ..., topk(d=depth)]."""
    tops = []
    for _ in range(depth):
        start = cache.get_seq_length()
        pos = torch.arange(start, start + len(feed), device=edge.device).unsqueeze(0)
        x = torch.tensor([feed], device=edge.device)
        row = edge(input_ids=x, past_key_values=cache, position_ids=pos, use_cache=True).logits[0, -1]
        top = row.topk(TOPK).indices.tolist()
        tops += top
        feed = [top[0]]
    return tops


def verify_tree(cloud, cache, tokens, buf, hooks):
    """One cloud forward over every node of the tree."""
    past = cache.get_seq_length()
    x = torch.tensor([tokens], device=cloud.device)
    mask = hooks["mask"](buf, past, cloud.dtype, cloud.device)
    pos = hooks["positions"](buf, past).to(cloud.device)
    out = cloud(input_ids=x, past_key_values=cache, attention_mask=mask, position_ids=pos,
                use_cache=True)
    return out.logits[0], past


@torch.no_grad()
def run(edge, cloud, input_ids, k, max_new_tokens, stop_ids, **hooks):
    hooks = {"mask": tree_mask, "positions": tree_positions, "copy": copy_down, **hooks}
    buf = tree_buffers([c for c in CHOICES if len(c) <= k])
    stop_ids, seq = {int(s) for s in stop_ids}, input_ids[0].tolist()
    n_prompt, depth = len(seq), int(buf["depth"].max())
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    out = cloud(input_ids=input_ids.to(cloud.device), past_key_values=cloud_cache, use_cache=True)
    seq.append(int(out.logits[0, -1].argmax()))          # the first root: the cloud's token
    edge_seen = 0
    while seq[-1] not in stop_ids and len(seq) - n_prompt < max_new_tokens:
        tops = draft_chain(edge, edge_cache, seq[edge_seen:], depth)
        drafted = seq + tops[::TOPK]                     # what the edge cache now holds
        candidates = torch.tensor([seq[-1]] + tops)
        tokens = candidates[buf["cand"]]
        logits, past = verify_tree(cloud, cloud_cache, tokens.tolist(), buf, hooks)
        paths = buf["retrieve"]
        idx = paths.clamp(min=0)
        best, n_ok = evaluate_posterior(logits[idx], tokens[idx], paths >= 0)
        select = paths[best, :n_ok + 1]
        new = tokens[select[1:]].tolist() + [int(logits[select[-1]].argmax())]
        hooks["copy"](cloud_cache, (select + past).tolist(), past)
        for tok in new:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                break
        keep = next((i for i, (a, b) in enumerate(zip(drafted, seq)) if a != b), len(seq) - 1)
        edge_seen = min(keep, len(seq) - 1, edge_cache.get_seq_length())
        rollback(edge_cache, edge_seen)
    return seq[n_prompt:]


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    return run(edge, cloud, input_ids, k, max_new_tokens, stop_ids)
