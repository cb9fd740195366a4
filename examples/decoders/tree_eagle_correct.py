"""A correct greedy DYNAMIC-tree loop in the style of EAGLE-2 (the edge model drafts the tree).

Drafting grows the tree depth by depth: the edge scores the last committed token (the root),
then, k - 1 times, feeds the `BRANCH` most probable frontier nodes (by cumulative draft
log-prob) in one forward with a tree mask over its own cache (each node sees the committed
prefix and its ancestors' slots) and positions = root + depth, and each fed node gets its
`BRANCH` best children. The `NODES` nodes of best cumulative log-prob are verified by the cloud
in one forward (4D mask, tree positions); the longest path whose every node is the cloud's argmax
at its parent is accepted, plus the cloud's token after it. The cloud's cache is compacted by
copying the accepted nodes' keys/values down (as EAGLE does); the edge's is cropped to the
committed prefix and the path is fed again next round. Output = the cloud's greedy decode.

tree_parent_slots.py is this loop with one bug put in (`# BUG` marks it).
"""
import torch
from transformers import DynamicCache

BRANCH, NODES = 2, 10


def mask4d(visible, dtype, device):
    out = torch.zeros(visible.shape, dtype=dtype)
    out.masked_fill_(~visible, torch.finfo(dtype).min)
    return out[None, None].to(device)


def forward(model, cache, ids, positions, visible=None):
    """Feed `ids` after what `cache` holds, at `positions`, seeing `visible` [n, past + n]."""
    x = torch.tensor([ids], device=model.device)
    pos = torch.tensor([positions], device=model.device)
    mask = None if visible is None else mask4d(visible, model.dtype, model.device)
    out = model(input_ids=x, past_key_values=cache, position_ids=pos, attention_mask=mask,
                use_cache=True)
    return torch.log_softmax(out.logits[0].float(), -1)


def rollback(cache, keep):
    drop = cache.get_seq_length() - keep
    if drop > 0:
        cache.crop(-drop)


def ancestors_mask(nodes, fed, past, slot_of):
    """Rows for the `fed` nodes: the prefix (< past's tree start), their ancestors' slots, self."""
    start = nodes[0]["slot0"]
    vis = torch.zeros(len(fed), past + len(fed), dtype=torch.bool)
    vis[:, :start] = True
    for r, i in enumerate(fed):
        a = nodes[i]["parent"]
        while a is not None:
            vis[r, slot_of[a]] = True
            a = nodes[a]["parent"]
        vis[r, past + r] = True
    return vis


def children(nodes, parent, logp, depth, root_pos, start):
    for tok in logp.topk(BRANCH).indices.tolist():
        base = nodes[parent]["score"] if parent is not None else 0.0
        nodes.append({"tok": tok, "parent": parent, "depth": depth, "pos": root_pos + depth,
                      "score": base + float(logp[tok]), "slot0": start})


def draft_tree(edge, cache, feed, root_pos, k, edge_mask=ancestors_mask):
    """EAGLE-2 expansion; returns the nodes ({tok, parent, depth, score})."""
    past = cache.get_seq_length()
    logp = forward(edge, cache, feed, list(range(past, past + len(feed))))[-1]
    nodes, slot_of, start = [], {}, past + len(feed)
    children(nodes, None, logp, 1, root_pos, start)
    frontier = list(range(len(nodes)))
    for depth in range(2, k + 1):
        fed = sorted(frontier, key=lambda i: -nodes[i]["score"])[:BRANCH]
        past = cache.get_seq_length()
        vis = edge_mask(nodes, fed, past, slot_of)
        logp = forward(edge, cache, [nodes[i]["tok"] for i in fed],
                       [nodes[i]["pos"] for i in fed], vis)
        frontier = []
        for r, i in enumerate(fed):
            slot_of[i] = past + r
            n0 = len(nodes)
            children(nodes, i, logp[r], depth, root_pos, start)
            frontier += range(n0, len(nodes))
    return nodes


def select(nodes):
    """The NODES best by cumulative log-prob (ancestor-closed), ordered by depth."""
    keep = sorted(range(len(nodes)), key=lambda i: -nodes[i]["score"])[:NODES]
    keep = set(keep)
    for i in list(keep):
        a = nodes[i]["parent"]
        while a is not None and a not in keep:
            keep.add(a)
            a = nodes[a]["parent"]
    return sorted(keep, key=lambda i: (nodes[i]["depth"], i))


def verify(cloud, cache, root, nodes, order):
    """One cloud forward over [root] + the tree; returns log-probs per fed row."""
    past = cache.get_seq_length()
    row = {i: r + 1 for r, i in enumerate(order)}
    vis = torch.zeros(len(order) + 1, past + len(order) + 1, dtype=torch.bool)
    vis[:, :past + 1] = True
    for i in order:
        a = i
        while a is not None:
            vis[row[i], past + row[a]] = True
            a = nodes[a]["parent"]
    pos = [past] + [past + nodes[i]["depth"] for i in order]
    return forward(cloud, cache, [root] + [nodes[i]["tok"] for i in order], pos, vis), row


def accept(logp, nodes, order, row):
    """Greedy: follow the child that is the cloud's argmax at its parent."""
    path, cur = [], None
    while True:
        want = int(logp[row[cur] if cur is not None else 0].argmax())
        nxt = next((i for i in order if nodes[i]["parent"] == cur and nodes[i]["tok"] == want), None)
        if nxt is None:
            return path, want
        path.append(nxt)
        cur = nxt


def copy_down(cache, rows, past):
    for layer in cache.layers:
        for name in ("keys", "values"):
            t = getattr(layer, name)
            t[..., past:past + len(rows), :] = t[..., rows, :]
    rollback(cache, past + len(rows))


@torch.no_grad()
def run(edge, cloud, input_ids, k, max_new_tokens, stop_ids, edge_mask=ancestors_mask):
    stop_ids, seq = {int(s) for s in stop_ids}, input_ids[0].tolist()
    n_prompt = len(seq)
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    out = cloud(input_ids=input_ids.to(cloud.device), past_key_values=cloud_cache, use_cache=True)
    seq.append(int(out.logits[0, -1].argmax()))
    while seq[-1] not in stop_ids and len(seq) - n_prompt < max_new_tokens:
        edge_seen = edge_cache.get_seq_length()
        nodes = draft_tree(edge, edge_cache, seq[edge_seen:], len(seq) - 1, k, edge_mask)
        rollback(edge_cache, len(seq))                      # crop; the path is fed next round
        order = select(nodes)
        past = cloud_cache.get_seq_length()
        logp, row = verify(cloud, cloud_cache, seq[-1], nodes, order)
        path, extra = accept(logp, nodes, order, row)
        copy_down(cloud_cache, [past] + [past + row[i] for i in path], past)
        for tok in [nodes[i]["tok"] for i in path] + [extra]:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                break
    return seq[n_prompt:]


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    return run(edge, cloud, input_ids, k, max_new_tokens, stop_ids)
