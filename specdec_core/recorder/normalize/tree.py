"""Token trees in a recording: rebuild each tree forward's tree, follow caches rewritten in place,
and hand the chain checks an equivalent chain: the catch-up ids, the accepted path and its first
rejected child (docs/recorder.md, "Tree loops")."""
from __future__ import annotations

import copy

from specdec_core.recorder.observe.tree_hooks import is_tree

TAIL = 16     # columns before a tree read for its rows' keys (draft_logp) and duplicate positions
PER_ROW = ("argmax", "top_ids", "top_logp", "entropy", "lse_t")


def infer_parent(raw: dict, i: int, nodes: list, depth: dict) -> int | None:
    """Without a mask: the node one level up, before i, under whose row ids[i] ranks best."""
    up = [j for j in nodes if j < i and depth[j] == depth[i] - 1]
    cross = (raw.get("rows") or {}).get("cross")
    if not up:
        return None
    if not cross:
        return up[-1]
    return min(up, key=lambda j: (cross["rank"][j][i], -j))


def inferred_path(raw: dict, tree: dict, C: list) -> list[int]:
    """Without a mask: at each depth the node with the committed id whose row's argmax is the
    next committed id (the cloud's own path)."""
    ids, rows, path = raw["ids"], raw.get("rows") or {}, []
    off = rows.get("offset", 0)
    argmax = lambda j: rows["argmax"][j - off] if rows and 0 <= j - off < len(rows["argmax"]) else None
    while tree["base"] + len(path) < len(C):
        q = tree["base"] + len(path)
        cand = [j for j in tree["nodes"] if tree["depth"][j] == len(path) and ids[j] == C[q]]
        if not cand:
            break
        nxt = C[q + 1] if q + 1 < len(C) else None
        path.append(next((j for j in cand if argmax(j) == nxt), cand[0]))
    return path


def _rank(rows: dict, off: int, a: int, b: int, ids: list) -> tuple:
    """(rank, logp) of ids[b] under row a, from what the recorder kept."""
    cross = rows.get("cross")
    if cross:
        return cross["rank"][a - off][b], cross["logp"][a - off][b]
    if b == a + 1 and a - off < len(rows["next_rank"]):
        return rows["next_rank"][a - off], rows["next_logp"][a - off]
    top = rows["top_ids"][a - off]
    if ids[b] in top:
        k = top.index(ids[b])
        return k + 1, rows["top_logp"][a - off][k]
    return None, None


def chain_rows(rows: dict | None, sel: list[int], n: int, ids: list | None = None) -> dict | None:
    """The rows of a tree forward for the chain of input indices `sel`."""
    if not rows:
        return rows
    off = rows["offset"]
    keep = [j for j in sel if j >= off]
    out = {k: [rows[k][j - off] for j in keep] for k in PER_ROW if k in rows}
    out.update(offset=len(sel) - len(keep), vocab=rows["vocab"], fed_next=None)
    ranks, lps = [], []
    for a, b in zip(keep, keep[1:]):
        r, lp = _rank(rows, off, a, b, ids or [])
        ranks.append(r)
        lps.append(lp)
    out["next_rank"], out["next_logp"] = ranks, lps
    return out


def stale_slots(exp: tuple, own: list, raw: dict) -> list[dict]:
    """The slots of the next forward's cache that hold another node than the accepted path's."""
    fi, want = exp
    bad = [(s, node, own[s]) for s, node in sorted(want.items())
           if s < len(own) and own[s] is not None and own[s] != node]
    return [{"tree_forward": fi, "forward": raw["i"], "model": raw["model"], "slot": s,
             "want": w[1], "holds": h[1] if h[0] == fi else None} for s, w, h in bad[:1]]


def _base_pos(raw: dict, c0: int, slot_pos: list) -> int:
    """The position a node with no tree ancestor should have: one past column c0 - 1."""
    L, pos = raw.get("cache_len") or 0, raw.get("position_ids")
    prev = slot_pos[c0 - 1] if 0 < c0 <= L and c0 - 1 < len(slot_pos) else None
    if c0 > L and pos:
        prev = pos[c0 - 1 - L]
    return prev + 1 if prev is not None else c0


def _common_run(pos: list) -> int:
    """Without a mask: the leading ids each below every later position (catch-up, root) are
    ancestors of the whole tree, as the columns a mask shows to every row."""
    n = 0
    while n + 1 < len(pos) and pos[n] < min(pos[n + 1:]):
        n += 1
    return n


def _col_positions(raw: dict, c0: int, slot_pos: list) -> dict:
    """column -> position, for the tree's columns (cached ones from the slots' tape)."""
    L, pos, n = raw.get("cache_len") or 0, raw.get("position_ids"), len(raw.get("ids") or [])
    return {c: (pos[c - L] if pos else None) if c >= L else (slot_pos[c] if c < len(slot_pos) else None)
            for c in range(c0, L + n)}


def build_tree(raw: dict, slot_pos: list) -> dict:
    """{c0, base, nodes (input indices), parent, depth, sees, by} for one tree forward."""
    L, ids = raw.get("cache_len") or 0, raw.get("ids") or []
    pos, m = raw.get("position_ids"), raw.get("mask_rows")
    c0 = m["from"] if m else L + _common_run(pos or [])
    first = max(0, c0 - L)
    nodes = list(range(first, len(ids)))
    base = _base_pos(raw, c0, slot_pos)
    repeats = bool(pos) and len(set(pos[first:])) < len(nodes)
    sees = {i: [c for c in m["rows"][i] if c != L + i] for i in nodes} if m else None
    if repeats or not m:
        depth = {i: (pos[i] - base) if pos else i - first for i in nodes}
        by = "positions"
    else:
        depth = {i: len(sees[i]) for i in nodes}
        by = "mask"
    parent = {}
    for i in nodes:
        if m:
            up = [c for c in sees[i] if c >= L and depth.get(c - L) == depth[i] - 1] if by == "positions" \
                else [c for c in sees[i] if c >= L][-1:]
            parent[i] = (up[-1] - L) if up else None
        else:
            parent[i] = infer_parent(raw, i, nodes, depth)
    seen = [p for p in slot_pos[max(0, c0 - TAIL):min(c0, L)] if p is not None]
    return {"c0": c0, "base": base, "nodes": nodes, "parent": parent, "depth": depth,
            "common_dup": len(seen) != len(set(seen)),   # every row sees two slots at one position
            "sees": sees, "by": by, "col_pos": _col_positions(raw, c0, slot_pos)}


def accepted_path(raw: dict, tree: dict, C: list) -> list[int]:
    """Node indices of the longest root path that the committed sequence continues."""
    if tree["sees"] is None:
        return inferred_path(raw, tree, C)
    ids, path, cur = raw["ids"], [], None
    while True:
        d = len(path)
        want = tree["base"] + d
        kids = [i for i in tree["nodes"] if tree["parent"][i] == cur and tree["depth"][i] == d]
        nxt = next((i for i in kids if want < len(C) and ids[i] == C[want]), None)
        if nxt is None:
            return path
        path.append(nxt)
        cur = nxt


class _Slots:
    """Per cache: the position and owner (forward, input index) of every slot."""

    def __init__(self):
        self.pos: dict = {}
        self.own: dict = {}
        self.expect: dict = {}     # cache -> (tree forward, slot -> node it should hold)

    def step(self, raw: dict) -> tuple[list, list]:
        """Apply the forward's moves and crop; returns (slot positions, owners) before it."""
        key = (raw["model"], raw.get("cache"))
        if raw.get("cache") is None:
            return [], []
        pos, own = self.pos.get(key, []), self.own.get(key, [])
        moves = raw.get("slot_moves") or []
        p0, o0 = (list(pos), list(own)) if moves else (pos, own)
        for dst, src in moves:
            if dst < len(pos):
                pos[dst], own[dst] = (p0[src], o0[src]) if 0 <= src < len(p0) else (None, None)
        L = raw.get("cache_len") or 0
        pos = (pos + [None] * L)[:L]
        own = (own + [None] * L)[:L]
        if raw.get("use_cache") is not False:
            n = len(raw.get("ids") or [])
            p = raw.get("position_ids") or list(range(L, L + n))
            self.pos[key] = pos + list(p[:n]) + [None] * (n - len(p[:n]))
            self.own[key] = own + [(raw["i"], j) for j in range(n)]
        return pos, own


def _chain_form(raw: dict, tree: dict, path: list[int], C: list) -> dict:
    """The tree forward as the chain its accepted path is (catch-up + path + first rejected)."""
    ids, L = raw["ids"], raw.get("cache_len") or 0
    last, q = (path[-1] if path else None), tree["base"] + len(path)
    kids = [i for i in tree["nodes"] if tree["parent"][i] == last and i not in path
            and tree["depth"][i] == len(path) and (q >= len(C) or ids[i] != C[q])]
    sel = list(range(tree["nodes"][0] if tree["nodes"] else len(ids))) + path + kids[:1]
    out = dict(raw, ids=[ids[j] for j in sel], position_ids=list(range(L, L + len(sel))),
               cache_position=None if raw.get("cache_position") is None else list(range(L, L + len(sel))),
               mask_shape=None, tree_sel=sel, tree_block=L + (tree["nodes"] or [len(ids)])[0])
    out.pop("mask_rows", None)
    out["rows"] = chain_rows(raw.get("rows"), sel, len(ids), ids)
    return out


def _tails(raw: dict, tree: dict, pos: list, own: list, by_i: dict) -> dict:
    """Edge tree forward: node -> [(position, id)] of what its row saw near the tree, itself
    included, so round["tree"] can find the row that drafted a verified node's children."""
    L, ids = raw.get("cache_len") or 0, raw["ids"]

    def tok(c):
        if c >= L:
            return ids[c - L]
        o = own[c] if c < len(own) else None
        return by_i[o[0]]["ids"][o[1]] if o else None

    common = [c for c in range(max(0, tree["c0"] - TAIL), tree["c0"])]
    cols = lambda j: common + (tree["sees"][j] if tree["sees"] else []) + [L + j]
    return {j: [(tree["col_pos"].get(c, pos[c] if c < len(pos) else None), tok(c)) for c in cols(j)]
            for j in tree["nodes"]}


def _kept_path(raw: dict, tree: dict, own: list, C: list) -> list[int]:
    """Without a mask: the path the loop itself kept, read from the next forward's cache slots
    (copy-down followed): node per slot from the tree's first column, while ids are committed."""
    path = []
    for s in range(tree["c0"], len(own)):
        o, d = own[s], len(path)
        if not o or o[0] != raw["i"] or o[1] not in tree["depth"] or tree["depth"][o[1]] != d \
                or tree["base"] + d >= len(C) or raw["ids"][o[1]] != C[tree["base"] + d]:
            break
        path.append(o[1])
    return path


def _verified(raw: dict, tree: dict, path: list, slots: _Slots, key, C: list) -> dict:
    """The tree forward as the chain of its accepted `path`; a path read without a mask sets its parents."""
    for a, b in zip([None] + path, path):
        tree["parent"][b] = a
    tree["path"] = path
    L = raw.get("cache_len") or 0
    slots.expect[key] = (raw["i"], {tree["c0"] + d: (raw["i"], j) for d, j in enumerate(path)
                                    if L <= tree["c0"] + d})
    return _chain_form(raw, tree, path, C)


def normalize(rec: dict, ctx=None) -> tuple[dict, dict]:
    """recording -> (the recording with chain-form forwards, notes {"tree": tree info}: the raw
    forwards, each tree, the slots found stale; checks/tree/ makes the findings). A recording
    with no tree forward comes back as it is, with no note."""
    fw = rec.get("forwards") or []
    if not any(is_tree(f) for f in fw):
        return rec, {}
    C = list(rec.get("prompt_ids") or []) + list(rec.get("out_ids") or [])
    slots, trees, stale, out, pending = _Slots(), {}, [], [], {}
    by_i = {f["i"]: f for f in fw}
    for raw in fw:
        key = (raw["model"], raw.get("cache"))
        pos, own = slots.step(raw)
        exp = slots.expect.pop(key, None)
        if exp:
            stale += stale_slots(exp, own, raw)
        if key in pending:                  # a tree without a mask: the path the cache kept
            at, praw, ptree = pending.pop(key)
            path = _kept_path(praw, ptree, own, C) or accepted_path(praw, ptree, C)
            out[at] = _verified(praw, ptree, path, _Slots(), key, C)
        if not is_tree(raw) or raw.get("rows") is None and raw["model"] == "cloud":
            out.append(raw)
            continue
        tree = trees[raw["i"]] = build_tree(raw, pos)
        if raw["model"] == "edge":
            tree["tail"] = _tails(raw, tree, pos, own, by_i)
            out.append(dict(raw, ids=[], rows=None, cache=None, position_ids=None, cache_position=None,
                            mask_shape=None, tree_sel=[]))      # kept for its time, read through the tree
        elif tree["sees"] is None and raw.get("cache") is not None:
            pending[key] = (len(out), raw, tree)
            out.append(raw)
        else:
            out.append(_verified(raw, tree, accepted_path(raw, tree, C), slots, key, C))
    for key, (at, praw, ptree) in pending.items():
        out[at] = _verified(praw, ptree, accepted_path(praw, ptree, C), _Slots(), key, C)
    info = {"shape": "tree", "trees": trees, "raw": {f["i"]: f for f in fw if f["i"] in trees},
            "forwards": fw, "stale": stale}
    return dict(copy.copy(rec), forwards=out), {"tree": info}
