"""Token trees: the nodes, their shapes (static, dynamic), their masks and the acceptance rules.
Pure tensor and list work, no model. A node's parent is a node index, None for the root's
children; depth 1 = the root's children (the trace's round["tree"], design.md)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec_core.decoding import sampling


@dataclass
class Node:
    id: int
    parent: int | None
    depth: int
    draft_logp: float          # log q(id | its path), at the draft temperature
    score: float               # cumulative draft log-prob of the path to it (EAGLE-2's rank)
    rank: int = 0              # its rank among its parent's children (static shapes)
    entropy: float | None = None   # nats of the draft distribution it was picked from (its parent's row)


def children(nodes: list[Node], parent: int | None, logits: torch.Tensor, branch: int,
             temperature: float) -> list[int]:
    """The drafting step: `branch` children of `parent` from the drafter's next-token logits
    (the edge model's row today, a head's later); their indices."""
    logq = torch.log_softmax(logits / temperature if temperature > 0 else logits, -1)
    base = nodes[parent].score if parent is not None else 0.0
    depth = nodes[parent].depth + 1 if parent is not None else 1
    top = torch.topk(logq, min(branch, logq.shape[-1]))
    ent = float(sampling.entropy(logq.exp()))          # the draft entropy plots show for trees too
    first = len(nodes)
    nodes += [Node(tok, parent, depth, lp, base + lp, r, ent)
              for r, (lp, tok) in enumerate(zip(top.values.tolist(), top.indices.tolist()))]
    return list(range(first, len(nodes)))


# -- shapes --------------------------------------------------------------------------------
def static_paths(branch: int, k: int, n: int) -> set[tuple]:
    """A Medusa-style fixed tree: the `n` rank paths (r1, r2, ...) of depth <= k and ranks <
    branch with the smallest rank sums (ancestor-closed: a path's prefix sorts first)."""
    paths, frontier = [], [()]
    while frontier and len(paths) < n:
        frontier.sort(key=lambda p: (sum(p) + len(p), p))
        p = frontier.pop(0)
        if p:
            paths.append(p)
        if len(p) < k:
            frontier += [p + (r,) for r in range(branch)]
    return set(paths)


def rank_path(nodes: list[Node], i: int | None) -> tuple:
    """Node i's ranks among its siblings, from the root's child down (() for the root)."""
    return tuple(nodes[a].rank for a in reversed(ancestors(nodes, i)))


def to_expand(nodes: list[Node], frontier: list[int], cfg, shape: set | None) -> list[int]:
    """Which frontier nodes get children: dynamic, the tree_branch best by cumulative log-prob
    (EAGLE-2); static, those whose shape has children."""
    if shape is None:
        return sorted(frontier, key=lambda i: -nodes[i].score)[: cfg.tree_branch]
    return [i for i in frontier if rank_path(nodes, i) + (0,) in shape]


def select(nodes: list[Node], cfg, shape: set | None) -> list[int]:
    """The verified nodes, ancestor-closed, in depth order: dynamic, the tree_nodes best by
    cumulative log-prob (EAGLE-2's rerank); static, the nodes of the shape."""
    if shape is not None:
        keep = {i for i in range(len(nodes)) if rank_path(nodes, i) in shape}
    else:
        keep = set(sorted(range(len(nodes)), key=lambda i: -nodes[i].score)[: cfg.tree_nodes])
        for i in list(keep):
            while (i := nodes[i].parent) is not None:
                keep.add(i)
    return sorted(keep, key=lambda i: (nodes[i].depth, i))


def ancestors(nodes: list[Node], i: int | None) -> list[int]:
    """i and its ancestors, node indices (none for the root)."""
    out = []
    while i is not None:
        out.append(i)
        i = nodes[i].parent
    return out


# -- acceptance ------------------------------------------------------------------------------
@dataclass
class TreeVerdict:
    path: list[int]            # accepted node indices (positions in `order`), root first
    next_token: int
    next_prob: float
    next_rank: int


def accept(rule: str, nodes: list[Node], order: list[int], logits: torch.Tensor, cfg,
           gen: torch.Generator) -> TreeVerdict:
    """Walk down from the root: logits row 0 is the cloud at the root, row 1 + j at order[j].
    greedy: the child that is the cloud's argmax; rank: the child of best cloud rank within
    rank_threshold; sampling: recursive rejection over the siblings (exact)."""
    row = {i: r + 1 for r, i in enumerate(order)}
    kids: dict = {}
    for i in order:
        kids.setdefault(nodes[i].parent, []).append(i)
    path, cur = [], None
    while True:
        lg = logits[row[cur] if cur is not None else 0]
        nxt, tok = _step(rule, nodes, kids.get(cur, []), lg, cfg, gen)
        if nxt is None:
            p = sampling.probs(lg, cfg.temperature)
            return TreeVerdict(path, tok, float(p[tok]), sampling.rank_of(lg, tok))
        path.append(nxt)
        cur = nxt


def _step(rule, nodes, kids, lg, cfg, gen):
    """(accepted child, None) or (None, correction/bonus token) at one node."""
    greedy = cfg.temperature <= 0
    if rule == "sampling" and not greedy:
        return recursive_rejection([nodes[i].id for i in kids], kids,
                                   sampling.probs(lg, cfg.temperature), gen)
    if rule == "rank":
        ranks = [(sampling.rank_of(lg, nodes[i].id), i) for i in kids]
        best = min(ranks, default=None)
        if best is not None and best[0] <= cfg.rank_threshold:
            return best[1], None
        return None, sampling.pick(sampling.probs(lg, cfg.temperature), lg, cfg.temperature, gen)
    top = int(lg.argmax())
    return next((i for i in kids if nodes[i].id == top), None), top


def recursive_rejection(ids: list[int], kids: list[int], p: torch.Tensor, gen):
    """SpecInfer's recursive rejection over siblings, each sibling's draft distribution the
    point mass on its token (the children are chosen by the drafter, not sampled): sibling x is
    accepted with the residual's probability of x; if rejected, x is removed from the residual
    and the residual renormalised. Whatever the siblings, the token that results (an accepted
    sibling, else a draw from the last residual) is distributed exactly as p."""
    p = p.clone()
    for tok, i in zip(ids, kids):
        mass = float(p.sum())
        if mass <= 0:
            break
        if float(torch.rand(1, generator=gen)) * mass < float(p[tok]):
            return i, None
        p[tok] = 0.0
    if float(p.sum()) <= 0:
        return None, ids[-1]
    return None, sampling.draw(p / p.sum(), gen)
