"""The tree round (draft_tree = static | dynamic): draft a tree depth by depth, verify it in ONE
cloud forward with a tree mask, commit the accepted path, keep only that path in both caches
(docs/trees.md). Tree faults (`run.faults`) bend one line each, marked `fault:`."""
from __future__ import annotations

import time
from dataclasses import astuple

import torch

from specdec_core.decoding import tree
from specdec_core.decoding.trace import RoundRecord, TokenRecord
from specdec_core.decoding.verifier import top2_rows

# how the cloud keeps the accepted path: "gather" its slots (the default), or "refeed": crop to
# the prefix and feed the path again with the next round (bench_trees.py measures both)
COMPACTION = "gather"


def draft_tree(run, shape: set | None) -> list[tree.Node]:
    """The drafted tree (all nodes; `tree.select` picks the verified ones); `shape`: a static
    tree's rank paths (None: dynamic)."""
    cfg, edge, seq = run.cfg, run.edge, run.seq
    nodes: list[tree.Node] = []
    raw = edge.feed(seq.ids[edge.seen:], last_only=True)[-1]
    frontier = tree.children(nodes, None, _processed(run, nodes, None, raw), _width(cfg, shape, nodes, None), cfg.temperature)
    slot_of: dict[int, int] = {}
    for depth in range(2, cfg.k + 1):
        fed = tree.to_expand(nodes, frontier, cfg, shape)
        if not fed or run.interrupted() is not None:
            break
        past = edge._len
        for r, i in enumerate(fed):
            slot_of[i] = past + r
        sees = [_edge_sees(run, nodes, i, r, slot_of) for r, i in enumerate(fed)]
        root_pos = len(seq) - 1
        rows = edge.feed_tree([nodes[i].id for i in fed], [root_pos + nodes[i].depth for i in fed],
                              sees, base=len(seq))
        frontier = []
        for r, i in enumerate(fed):
            frontier += tree.children(nodes, i, _processed(run, nodes, i, rows[r]),
                                      _width(cfg, shape, nodes, i), cfg.temperature)
    edge.crop(len(seq))                   # the path is fed again with the next round's catch-up
    return nodes


def _width(cfg, shape, nodes, i) -> int:
    """Children to draft at node i: tree_branch, or as many as the static shape has there."""
    if shape is None:
        return cfg.tree_branch
    return sum(tree.rank_path(nodes, i) + (r,) in shape for r in range(cfg.tree_branch))


def _edge_sees(run, nodes, i, r, slot_of) -> list[int]:
    """The edge slots fed row r (node i) attends to beyond the committed prefix: its ancestors'
    and its own (fault tree_parent_slots, sglang #8228: the r-th draft slot of each earlier
    depth, in slot order, whoever's node that is)."""
    mine = [slot_of[a] for a in tree.ancestors(nodes, i)]
    if "tree_parent_slots" in run.faults:
        at: dict[int, list] = {}
        for j, s in sorted(slot_of.items(), key=lambda js: js[1]):
            at.setdefault(nodes[j].depth, []).append(s)
        mine = [slot_of[i]] + [at[d][min(r, len(at[d]) - 1)] for d in range(1, nodes[i].depth)]
    return mine


def _processed(run, nodes, i, raw: torch.Tensor) -> torch.Tensor:
    """The edge row after the logits processors (gates), which read the node's own path."""
    if not run.processors:
        return raw
    path = [nodes[a].id for a in reversed(tree.ancestors(nodes, i))]
    return run.processors(torch.tensor([run.seq.ids + path]), raw[None])[0]


def verify_tree(run, nodes, order) -> tuple[torch.Tensor, list[int], int]:
    """One cloud forward over the catch-up (ending at the root) and the nodes of `order`.
    Returns the logits rows [root, *order], the catch-up ids and the cloud slots' base."""
    cloud, seq = run.cloud, run.seq
    catch = seq.ids[cloud.seen: len(seq)]
    base, c = cloud.seen, len(catch)
    row = {i: base + c + r for r, i in enumerate(order)}
    sees = [list(range(base, base + r + 1)) for r in range(c)]
    for r, i in enumerate(order):
        mine = [row[a] for a in tree.ancestors(nodes, i)]
        if "sibling_mask" in run.faults:                        # fault: a node sees its siblings
            mine += [row[j] for j in order if j != i and nodes[j].parent == nodes[i].parent]
        sees.append(list(range(base, base + c)) + mine)
    pos = list(range(base, base + c)) + [len(seq) - 1 + nodes[i].depth for i in order]
    if "linear_positions" in run.faults:
        pos = list(range(base, base + c + len(order)))          # fault: positions by slot
    logits = cloud.feed_tree(catch + [nodes[i].id for i in order], pos, sees, base=base)
    return logits[c - 1:], catch, base


def compact(run, nodes, catch, base, order, path) -> None:
    """Both caches keep the committed path only: the cloud gathers the catch-up and path slots
    (fault no_compaction: keeps the first slots instead); the edge was cropped after drafting."""
    c = len(catch)
    if COMPACTION == "refeed" and "no_compaction" not in run.faults:
        run.cloud.compact(list(range(base, base + c)), catch, gather=False)
        return
    slots = list(range(base, base + c)) + [base + c + order.index(i) for i in path]
    ids = catch + [nodes[i].id for i in path]
    run.cloud.compact(slots, ids, gather="no_compaction" not in run.faults)


def records(run, nodes, order, v: tree.TreeVerdict, logits) -> tuple[list[TokenRecord], dict]:
    """Accepted path nodes, then the correction or bonus token; rejected nodes go to trace.rejected
    with their node index. And round["tree"]: nodes in verify order, parents as node indices (None:
    a child of the root), the path as node indices."""
    logp = torch.log_softmax(logits, -1)
    idx = {i: r for r, i in enumerate(order)}
    at0, out, shown = len(run.trace.tokens), [], []
    for i in order:
        n = nodes[i]
        par = idx[n.parent] + 1 if n.parent is not None else 0
        status = "accepted" if i in v.path else "rejected"
        r = TokenRecord(-1, n.id, run.text[n.id], status, run.round,
                        draft_prob=float(torch.exp(torch.tensor(n.draft_logp))),
                        target_prob=float(logp[par, n.id].exp()),
                        target_rank=int((logits[par] > logits[par, n.id]).sum()) + 1, node=idx[i],
                        entropy=n.entropy)
        shown.append({"id": n.id, "parent": idx.get(n.parent), "depth": n.depth,
                      "draft_logp": round(n.draft_logp, 5), "cloud_logp": round(float(logp[par, n.id]), 5),
                      "status": status})
        if i in v.path:
            out.append(r)
        else:
            r.at = at0 + n.depth - 1
            run.trace.rejected.append(r)
    out.sort(key=lambda r: nodes[order[r.node]].depth)
    leaf = not any(nodes[i].parent == (v.path[-1] if v.path else None) for i in order)
    out.append(TokenRecord(-1, v.next_token, run.text[v.next_token], "bonus" if leaf else "corrected",
                           run.round, target_prob=v.next_prob, target_rank=v.next_rank))
    for r, t2 in zip(out, top2_rows(logits[[0] + [idx[i] + 1 for i in v.path]])):
        r.cloud_top2 = t2
    return out, {"nodes": shown, "path": [idx[i] for i in v.path]}


def play_round(run) -> RoundRecord | None:
    """One tree round. None when cancelled or out of time before the cloud was asked."""
    run.round += 1
    t0, cfg = time.perf_counter(), run.cfg
    shape = tree.static_paths(cfg.tree_branch, cfg.k, cfg.tree_nodes) if cfg.draft_tree == "static" else None
    nodes = draft_tree(run, shape)
    if (stop := run.interrupted()) is not None:
        run.end(stop)
        return None
    order = tree.select(nodes, cfg, shape)
    rnd = RoundRecord(run.round, start=len(run.trace.tokens), drafted=len(order), verified=True,
                      draft_s=time.perf_counter() - t0)
    t1 = time.perf_counter()
    logits, catch, base = verify_tree(run, nodes, order)
    v = tree.accept(run.cfg.verify, nodes, order, logits, run.cfg, run.gen)
    compact(run, nodes, catch, base, order, v.path)
    recs, rnd.tree = records(run, nodes, order, v, logits)
    rnd.accepted, rnd.cloud_fed = len(v.path), len(catch) + len(order)
    link = getattr(run.verifier, "link", None)
    if link is not None:
        rnd.bytes_up, rnd.bytes_down, rnd.link_s, rnd.request_s = astuple(link.call(rnd.cloud_fed))
    rnd.verify_s = time.perf_counter() - t1
    rnd.committed = run.commit(run, recs)
    for runner in (run.edge, run.cloud):
        runner.crop(min(runner.seen, len(run.seq.ids) - 1))
    run.trace.rounds.append(rnd)
    return rnd
