"""Rounds and trace of a recorded tree loop: the round of a tree verify forward keeps only the
drafts made from the verified path's context (off-path candidates are drafted from other
contexts by design), and carries round["tree"] in the built-in decoder's schema
(design.md, "Token trees"): nodes {id, parent, depth, draft_logp, status}, path."""
from __future__ import annotations


def is_tree_round(rnd) -> bool:
    return rnd.verified and rnd.cloud.raw.get("tree_sel") is not None


def fix_rounds(rounds: list) -> list:
    """A tree drafts several candidates per parent by design: the chain's draft rule (the draft
    is the edge's argmax) is kept for the path's drafts that are their row's argmax only."""
    for rnd in rounds:
        if is_tree_round(rnd):
            ref = rnd.cloud.ctx
            rnd.drafted_by = {p: (f, r) for p, (f, r) in rnd.drafted_by.items()
                              if p < len(ref) and f.ctx[:p] == ref[:p]
                              and f.rows["argmax"][r] == ref[p]}
    return rounds


def _edge_rows(rnd, base: int) -> dict:
    """tokens after the root up to the scored position -> (edge forward, row)."""
    out = {}
    for f in rnd.edge:
        for q in f.row_positions():
            if q >= base and None not in f.ctx[base + 1:q + 1]:
                out[tuple(f.ctx[base + 1:q + 1])] = (f, q - f.first_q)
    return out


def round_tree(rnd, tree: dict, raw: dict) -> dict:
    """The tree of one round: node order as fed, parents as node indices, the path."""
    ids, nodes = raw["ids"], tree["nodes"]
    index = {j: n for n, j in enumerate(nodes)}
    rows = _edge_rows(rnd, tree["base"])
    path, on_path = tree.get("path") or [], set(tree.get("path") or [])
    out = []
    for j in nodes:
        chain, p = [], tree["parent"][j]
        while p is not None:
            chain.append(ids[p])
            p = tree["parent"][p]
        key = tuple(reversed(chain[:-1])) if chain else None
        got = rows.get(key) if key is not None else None
        lp = got[0].logp_of(got[1], ids[j]) if got else None
        par = tree["parent"][j]
        out.append({"id": ids[j], "parent": index.get(par) if par is not None else None,
                    "depth": tree["depth"][j], "draft_logp": lp,
                    "status": "accepted" if j in on_path else "rejected"})
    return {"nodes": out, "path": [index[j] for j in path]}


def attach(trace, rounds: list, info: dict) -> None:
    """round["tree"] on the trace's rounds of tree verify forwards."""
    trees = info.get("trees") or {}
    for rnd, rr in zip(rounds, trace.rounds):
        tree = trees.get(rnd.cloud.i) if rnd.verified else None
        if tree is not None:
            rr.tree = round_tree(rnd, tree, _original(info, rnd.cloud.i))
    trace.config["draft_shape"] = info.get("shape", "chain")


def _original(info: dict, i: int) -> dict:
    return info["raw"][i]
