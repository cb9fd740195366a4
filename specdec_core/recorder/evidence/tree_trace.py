"""Rounds and trace of a recorded tree loop: the round of a tree verify forward keeps only the
drafts made from the verified path's context (off-path candidates are drafted from other
contexts by design), and carries round["tree"] in the built-in decoder's schema
(design.md, "Token trees"): nodes {id, parent, depth, draft_logp, status}, path."""
from __future__ import annotations


def fix_rounds(rounds: list) -> list:
    """A tree drafts several candidates per parent by design: the chain's draft rule (the draft
    is the edge's argmax) is kept for the path's drafts that are their row's argmax only."""
    for rnd in rounds:
        if rnd.is_tree:
            ref = rnd.cloud.ctx
            rnd.drafted_by = {p: (f, r) for p, (f, r) in rnd.drafted_by.items()
                              if p < len(ref) and f.ctx[:p] == ref[:p]
                              and f.rows["argmax"][r] == ref[p]}
    return rounds


def _edge_rows(rnd, base: int, info: dict) -> dict:
    """tree tokens (positions >= base) up to the scored position -> that row's (top ids, logps)."""
    out = {}
    for f in rnd.edge:
        for q in f.row_positions():
            if q >= base - 1 and None not in f.ctx[base:q + 1]:
                r = q - f.first_q
                out[tuple(f.ctx[base:q + 1])] = (f.rows["top_ids"][r], f.rows["top_logp"][r])
        tree, raw = info["trees"].get(f.i), info["raw"].get(f.i)
        if tree is None or not raw.get("rows") or raw["rows"]["offset"]:
            continue
        for j, tail in tree.get("tail", {}).items():
            key = tuple(t for p, t in tail if p is not None and p >= base)
            out[key] = (raw["rows"]["top_ids"][j], raw["rows"]["top_logp"][j])
    return out


def _path_key(tree: dict, ids: list, j) -> tuple:
    chain = []
    while j is not None:
        chain.append(ids[j])
        j = tree["parent"][j]
    return tuple(reversed(chain))


def _other_context(rows: dict, key: tuple, tok: int) -> bool:
    """No drafting row has the parent's verified path, but one with the parent's id at its
    depth, after other tokens, drafted this node: drafting read another branch's slots."""
    return key not in rows and any(len(k) == len(key) and k[-1] == key[-1] and tok in top
                                   for k, (top, _) in rows.items() if k)


def _cloud_logp(raw: dict, tree: dict, j: int):
    """The verify forward's log-prob of node j at its parent's row (the root's: the last
    committed token, fed just before the nodes); None when that row or its top ids lack it."""
    rows, par = raw.get("rows") or {}, tree["parent"][j]
    x = par if par is not None else tree["nodes"][0] - 1
    r = x - (rows.get("offset") or 0)
    if x < 0 or not 0 <= r < len(rows.get("top_ids") or []) or raw["ids"][j] not in rows["top_ids"][r]:
        return None
    return rows["top_logp"][r][rows["top_ids"][r].index(raw["ids"][j])]


def round_tree(rnd, tree: dict, raw: dict, info: dict) -> tuple[dict, list]:
    """The tree of one round: node order as fed, parents as node indices, the path; depth 1 =
    a child of the last committed token (Medusa's and EAGLE's tree position ids). Also the
    nodes drafted from a row whose context is not their parent's path."""
    ids, nodes = raw["ids"], tree["nodes"]
    index = {j: n for n, j in enumerate(nodes)}
    rows = _edge_rows(rnd, tree["base"], info)
    on_path, out, wrong = set(tree.get("path") or []), [], []
    for j in nodes:
        par = tree["parent"][j]
        key = _path_key(tree, ids, par)
        top, lps = rows.get(key, ((), ()))
        if key and _other_context(rows, key, ids[j]):
            wrong.append((raw["i"], j))
        out.append({"id": ids[j], "parent": index.get(par) if par is not None else None,
                    "depth": tree["depth"][j] + 1,
                    "draft_logp": lps[top.index(ids[j])] if ids[j] in top else None,
                    "cloud_logp": _cloud_logp(raw, tree, j),
                    "status": "accepted" if j in on_path else "rejected"})
    return {"nodes": out, "path": [index[j] for j in tree.get("path") or []],
            "forward": raw["i"]}, wrong          # forward: the cloud call (the Inspect drill-down's step)


def round_trees(rounds: list, info: dict) -> dict:
    """round n -> round_tree() of every round verified by a tree forward (Evidence.tree_rounds:
    the trace and the `trees` check read it)."""
    trees = info.get("trees") or {}
    return {rnd.n: round_tree(rnd, trees[rnd.cloud.i], info["raw"][rnd.cloud.i], info)
            for rnd in rounds if rnd.verified and rnd.cloud.i in trees}


def attach(trace, tree_rounds: dict, info: dict) -> None:
    """round["tree"] on the trace's rounds of tree verify forwards."""
    for rr in trace.rounds:
        if rr.round in tree_rounds:
            rr.tree = tree_rounds[rr.round][0]
    trace.config["draft_shape"] = info.get("shape", "chain")
