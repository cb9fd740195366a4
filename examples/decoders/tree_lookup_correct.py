"""A correct greedy tree loop with NO drafting model: the candidates are looked up in the text
(as prompt-lookup / n-gram drafters do, and like Medusa's heads, without a second forward).

Every earlier occurrence of the last committed token proposes the tokens that followed it
there; the continuations are merged into a trie (one node per distinct prefix), which the cloud
verifies in one forward with a 4D mask and tree positions. The longest path whose every node is
the cloud's argmax at its parent is accepted, plus the cloud's next token; the accepted nodes'
keys/values are copied down in place. The edge model is never called.
Its output equals the cloud model's own greedy decode, token for token.
"""
import torch
from transformers import DynamicCache

MAX_NODES = 12


def lookup_trie(seq, depth):
    """Nodes (token, parent index or None, depth) of the continuations of seq[-1] in seq."""
    nodes, index = [], {}
    for start in range(len(seq) - 2, -1, -1):
        if seq[start] != seq[-1]:
            continue
        parent = None
        for d, tok in enumerate(seq[start + 1:start + 1 + depth], 1):
            key = (parent, tok)
            if key not in index:
                if len(nodes) >= MAX_NODES:
                    return nodes
                index[key] = len(nodes)
                nodes.append((tok, parent, d))
            parent = index[key]
    return nodes


def verify(cloud, cache, root, nodes):
    past = cache.get_seq_length()
    n = len(nodes) + 1
    vis = torch.zeros(n, past + n, dtype=torch.bool)
    vis[:, :past + 1] = True
    for i in range(len(nodes)):
        a = i
        while a is not None:
            vis[i + 1, past + 1 + a] = True
            a = nodes[a][1]
    mask = torch.zeros(vis.shape, dtype=cloud.dtype).masked_fill_(~vis, torch.finfo(cloud.dtype).min)
    pos = torch.tensor([[past] + [past + d for _, _, d in nodes]], device=cloud.device)
    x = torch.tensor([[root] + [t for t, _, _ in nodes]], device=cloud.device)
    out = cloud(input_ids=x, past_key_values=cache, attention_mask=mask[None, None].to(cloud.device),
                position_ids=pos, use_cache=True)
    return out.logits[0].argmax(-1).tolist(), past


def accept(target, nodes):
    path, cur = [], None
    while True:
        want = target[0 if cur is None else cur + 1]
        nxt = next((i for i, (t, p, _) in enumerate(nodes) if p == cur and t == want), None)
        if nxt is None:
            return path, want
        path.append(nxt)
        cur = nxt


def copy_down(cache, rows, past):
    for layer in cache.layers:
        for name in ("keys", "values"):
            t = getattr(layer, name)
            t[..., past:past + len(rows), :] = t[..., rows, :]
    drop = cache.get_seq_length() - (past + len(rows))
    if drop > 0:
        cache.crop(-drop)


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    stop_ids, seq = {int(s) for s in stop_ids}, input_ids[0].tolist()
    n_prompt, cache = len(seq), DynamicCache()
    out = cloud(input_ids=input_ids.to(cloud.device), past_key_values=cache, use_cache=True)
    seq.append(int(out.logits[0, -1].argmax()))
    while seq[-1] not in stop_ids and len(seq) - n_prompt < max_new_tokens:
        nodes = lookup_trie(seq, k)
        target, past = verify(cloud, cache, seq[-1], nodes)
        path, extra = accept(target, nodes)
        copy_down(cache, [past] + [past + 1 + i for i in path], past)
        for tok in [nodes[i][0] for i in path] + [extra]:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                break
    return seq[n_prompt:]
