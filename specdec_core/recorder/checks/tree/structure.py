"""Checks on token trees (recorder/normalize/tree.py rebuilds them): `tree_mask` (a node sees a node that
is not its ancestor), `tree_positions` (a node's position is not prefix + depth), `stale_cache`
after acceptance (the next forward's cache holds a rejected node's keys), `draft_context` (the
same mistakes in the edge's drafting forwards: lossless, fewer accepted drafts) and
`tree_inferred` (no mask was passed: the tree was read from the positions and the rows)."""
from __future__ import annotations

from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check


def _mask_errors(tree: dict, L: int, edge: bool = False) -> list[tuple]:
    """(node, columns it sees that are not its ancestors) where the mask is not a tree."""
    sees, bad = tree["sees"], []
    if sees is None:
        return bad
    if tree.get("common_dup") and edge:      # the rows see two cached slots at one position
        return [(i, []) for i in tree["nodes"]]
    col_depth = {c: (p - tree["base"]) if p is not None else None for c, p in tree["col_pos"].items()}
    for i in tree["nodes"]:
        p, vis = tree["parent"][i], set(sees[i])
        if tree["by"] == "positions":
            ds = sorted(col_depth.get(c) if col_depth.get(c) is not None else -1 for c in vis)
            ok = ds == list(range(tree["depth"][i]))
        else:
            ok = True
        if ok and p is not None:
            ok = vis == set(sees[p]) | {L + p}
        if not ok:
            anc = set(sees[p]) | {L + p} if p is not None else set()
            bad.append((i, sorted(vis - anc) or sorted(vis)))
    return bad


def _position_errors(raw: dict, tree: dict) -> list[tuple]:
    pos = raw.get("position_ids")
    if not pos or tree["by"] != "mask":
        return []
    return [(i, pos[i], tree["base"] + tree["depth"][i]) for i in tree["nodes"]
            if pos[i] != tree["base"] + tree["depth"][i]]


def _ev(raw: dict, **kw) -> dict:
    return {"model": raw["model"], "forward": raw["i"], "position": None, "tokens": None, **kw}


def _mask_finding(hits: list, n_trees: int, accepted: float | None) -> list:
    raw, tree, bad = hits[0]
    i, cols = bad[0]
    where = f"{raw['model']} forward {raw['i']}: the node fed at index {i} (id {raw['ids'][i]}) " \
            f"sees cache column(s) {cols[:6] or 'before the tree, two at one position,'} that are " \
            "not its ancestors"
    if raw["model"] == "edge":
        return [finding("draft_context", f"drafting reads slots that are not the node's ancestors "
                        f"in {len(hits)} of {n_trees} tree forward(s)", where,
                        "the draft tree's mask lets a node attend to other draft slots (siblings "
                        "or the previous depth's frontier) instead of its parents only: drafts "
                        "come from a context the cloud never verifies; lossless, fewer accepted "
                        f"(here {accepted} drafts accepted per verify, on average)",
                        "build each drafting row's mask from the node's ancestors (parent chain)",
                        _ev(raw, columns=cols[:8], n_forwards=len(hits),
                            mean_accepted=accepted))]
    return [finding("tree_mask", f"a tree node sees a non-ancestor in {len(hits)} verify forward(s)",
                    where, "the tree attention mask lets a node attend to a sibling or another "
                    "branch: its row is computed from a context no path has, so the cloud's "
                    "verdict on its children is not the cloud's greedy choice",
                    "each node's row of the 4D mask: the committed prefix, its ancestors and "
                    "itself only", _ev(raw, columns=cols[:8], n_forwards=len(hits)))]


def context_finding(wrong: list, n_nodes: int, accepted: float | None) -> list:
    """Verified nodes whose drafting row read another branch (recorder/evidence/tree_trace.py)."""
    fi, j = wrong[0]
    return [finding("draft_context", f"{len(wrong)} of {n_nodes} verified tree nodes were drafted "
                    "from a row that did not see their parent's path",
                    f"cloud forward {fi}: the node fed at index {j} was drafted by an edge row whose "
                    "context has its parent's id at the right depth but after other tokens",
                    "drafting attends to draft slots in slot order (the first slot of each depth, "
                    "or all of them) instead of each node's ancestors: drafts come from contexts "
                    f"the cloud never verifies; lossless, fewer accepted (here {accepted} drafts "
                    "accepted per verify, on average)",
                    "build each drafting row's mask from the node's own ancestors' slots",
                    {"model": "cloud", "forward": fi, "position": None, "tokens": None,
                     "n_nodes": len(wrong), "mean_accepted": accepted})]


def _position_finding(hits: list) -> list:
    raw, tree, bad = hits[0]
    i, got, want = bad[0]
    code = "draft_context" if raw["model"] == "edge" else "tree_positions"
    return [finding(code, f"tree positions are not prefix + depth in {len(hits)} forward(s)",
                    f"{raw['model']} forward {raw['i']}: the node fed at index {i}, depth "
                    f"{tree['depth'][i] + 1}, has position {got}, expected {want}",
                    "positions counted by slot (arange over the flattened tree) instead of the "
                    "node's depth: siblings get different rotary positions, deeper nodes too far",
                    "position_ids = prefix length + depth of each node (Medusa's tree position ids)",
                    _ev(raw, position=got, expected=want, n_forwards=len(hits)))]


def _stale_finding(stale: list) -> list:
    s = stale[0]
    held = "a rejected node's keys" if s["holds"] is not None else "keys from elsewhere"
    return [finding("stale_cache", f"after tree verification the cache holds {held} "
                    f"({len(stale)} round(s))",
                    f"{s['model']} forward {s['forward']}: cache slot {s['slot']} should hold the "
                    f"accepted node {s['want']} of tree forward {s['tree_forward']}, it holds "
                    + (f"node {s['holds']}" if s["holds"] is not None else "something else"),
                    "the cache was not compacted to the accepted path: the first slots of the tree "
                    "(or a discarded copy) were kept instead of the accepted nodes' keys/values",
                    "copy the accepted nodes' keys and values down into the slots after the prefix "
                    "(or crop to the prefix and re-feed the path) before the next forward",
                    {"model": s["model"], "forward": s["forward"], "position": s["slot"],
                     "tokens": None, "n_rounds": len(stale)})]


def tree_findings(forwards: list, trees: dict, stale: list, accepted: float | None) -> list:
    by_i = {f["i"]: f for f in forwards}
    masks, poss, out = {"edge": [], "cloud": []}, {"edge": [], "cloud": []}, []
    for i, tree in trees.items():
        raw = by_i[i]
        bad = _mask_errors(tree, raw.get("cache_len") or 0, raw["model"] == "edge")
        if bad:
            masks[raw["model"]].append((raw, tree, bad))
        badp = _position_errors(raw, tree)
        if badp:
            poss[raw["model"]].append((raw, tree, badp))
    for model in ("cloud", "edge"):
        n = sum(by_i[i]["model"] == model for i in trees)
        if masks[model]:
            out += _mask_finding(masks[model], n, accepted)
        elif poss[model]:
            out += _position_finding(poss[model])
    out += _stale_finding(stale) if stale else []
    inferred = [i for i, t in trees.items() if t["sees"] is None]
    if inferred:
        out.append(finding("tree_inferred", f"{len(inferred)} tree forward(s) without a mask argument",
                           "no 4D attention mask was passed (an attention patched to read it from "
                           "the model): depths were read from the positions, the accepted path from "
                           "the slots the next forward's cache kept (or the committed ids), other "
                           "parents from the rows (the node one level up under whose row it ranks "
                           "best); tree_mask cannot be checked",
                           "", "pass the tree mask as attention_mask to have it checked",
                           _ev(by_i[inferred[0]], n_forwards=len(inferred))))
    return out


@check("tree_mask", "tree_positions", "stale_cache", "draft_context", "tree_inferred", scope="row",
       order=0.3)
def trees(e) -> list:
    """The trees the tree normalizer rebuilt (its notes), and tree nodes drafted from another
    branch's context (unless the tree checks said so)."""
    info = e.trees
    trees = info.get("trees") or {}
    if not trees:
        return []
    paths = [len(t["path"]) for t in trees.values() if t.get("path") is not None]
    accepted = round(sum(paths) / len(paths), 2) if paths else None
    out = tree_findings(info["forwards"], trees, info["stale"], accepted)
    wrong = [w for _, ws in e.tree_rounds.values() for w in ws]
    if not wrong or any(f["code"] == "draft_context" for f in out):
        return out
    n = sum(len(tree["nodes"]) for tree, _ in e.tree_rounds.values())
    return out + context_finding(wrong, n, accepted)
