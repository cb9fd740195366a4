"""Normalize a verifier that GENERATES instead of scoring (issue 48, item 1; docs/recorder.md,
"Layouts of 2026's loops"): its one-token forwards after a drafting run are merged into one
verify forward; those past what the loop kept are dropped and counted in its note (the speed
check `verify_generates` reads it)."""
from __future__ import annotations

import copy

NOT_PER_ROW = ("offset", "vocab", "next_rank", "next_logp", "fed_next")


def _drafted(edge: list[dict], greedy: bool) -> dict:
    """position -> drafted token, from the round's edge forwards: the id fed after it, or (the
    last draft, never fed) the last row's argmax under greedy."""
    out, mine = {}, {g["i"] for g in edge}
    for g in edge:
        rows, L = g.get("rows"), g.get("cache_len") or 0
        if not rows:
            continue
        nxt, fed = L + len(g["ids"]), rows.get("fed_next") or {}
        for r in range(len(rows["argmax"])):
            q = L + rows["offset"] + r
            if q + 1 < nxt:
                out[q + 1] = g["ids"][q + 1 - L]
            elif fed.get("forward") in mine:
                out[q + 1] = fed.get("token")
            else:                      # the last draft, never fed: known under greedy only
                out[q + 1] = rows["argmax"][r] if greedy else None
    return out


def _runs(fw: list[dict], greedy: bool):
    """(edge forwards before, [F0..Fm], next cloud forward on the cache or None) per generate run."""
    edge, i = [], 0
    while i < len(fw):
        f = fw[i]
        if f.get("model") == "edge":
            edge.append(f)
            i += 1
            continue
        if f.get("model") != "cloud" or not f.get("rows") or (f.get("batch") or 1) > 1:
            i += 1
            continue
        run, j = [f], i + 1
        while (j < len(fw) and fw[j].get("model") == "cloud" and fw[j].get("cache") == f.get("cache")
               and len(fw[j].get("ids") or []) == 1 and fw[j].get("rows")
               and fw[j].get("cache_len") == (run[-1].get("cache_len") or 0) + len(run[-1]["ids"])):
            run.append(fw[j])
            j += 1
        end = (f.get("cache_len") or 0) + len(f.get("ids") or [])
        if len(run) > 1 and edge and end in _drafted(edge, greedy):
            nxt = next((g for g in fw[j:] if g.get("model") == "cloud" and g.get("cache") == f.get("cache")), None)
            yield edge, run, nxt
        edge, i = [], j


def _merge(edge: list[dict], run: list[dict], keep: int, greedy: bool, C: list) -> dict:
    m = copy.deepcopy(run[0])
    K = (m.get("cache_len") or 0) + len(m["ids"])
    used = run[:keep + 1]                     # F0 and the forwards whose tokens were kept
    m["ids"] = list(m["ids"]) + [g["ids"][0] for g in used[1:]]
    rows = m["rows"]
    n_rows = len(rows["argmax"])
    per_row = [k for k, v in rows.items() if k not in NOT_PER_ROW and isinstance(v, list) and len(v) == n_rows]
    for g in used[1:]:
        for k in per_row:
            rows[k] = list(rows[k]) + list(g["rows"].get(k) or [None])
    prev = used[:-1]
    rows["next_rank"] = list(rows["next_rank"]) + [g["rows"]["fed_next"]["rank"] for g in prev]
    rows["next_logp"] = list(rows["next_logp"]) + [g["rows"]["fed_next"]["logp"] for g in prev]
    rows["fed_next"] = None
    d, last = _drafted(edge, greedy).get(K + keep), used[-1]["rows"]
    if d is not None and K + keep < len(C) and d != C[K + keep] and d in last["top_ids"][-1]:
        r = last["top_ids"][-1].index(d)
        m["ids"].append(d)                  # the rejected draft, scored by the kept row
        rows["next_rank"].append(r + 1)
        rows["next_logp"].append(last["top_logp"][-1][r])
    n = len(m["ids"])
    L = m.get("cache_len") or 0
    for key in ("position_ids", "cache_position"):
        if m.get(key):
            m[key] = list(m[key]) + list(range(m[key][-1] + 1, m[key][-1] + 1 + n - len(m[key])))
    if m.get("mask_shape"):
        m["mask_shape"] = m["mask_shape"][:-1] + [L + n]
    if m.get("time") and all(g.get("time") for g in run):
        m["time"] = dict(m["time"], dur=round(sum(g["time"]["dur"] for g in run), 6))
    m["generated"] = len(run)
    return m


def normalize(rec: dict, ctx=None) -> tuple[dict, dict]:
    """-> (recording with each generate run as one verify forward, notes: {"generated": counts}
    read by checks/speed/verify_generates.py, and "own": the cloud's own tokens by run, by rule.py)."""
    fw = rec.get("forwards") or []
    greedy = not (rec.get("declared") or {}).get("temperature")
    runs = list(_runs(fw, greedy))
    if not runs:
        return rec, {}
    C = list(rec.get("prompt_ids") or []) + list(rec.get("out_ids") or [])
    merged, drop, total, own = {}, set(), 0, {}
    for edge, run, nxt in runs:
        K = (run[0].get("cache_len") or 0) + len(run[0]["ids"])
        kept = (nxt.get("cache_len") or 0) - K if nxt is not None else len(C) - K - 1
        kept = max(0, min(kept, len(run) - 1))
        merged[run[0]["i"]] = _merge(edge, run, kept, greedy, C)
        own[run[0]["i"]] = (K, [g["ids"][0] for g in run[1:]])     # the cloud's own tokens from K
        drop |= {g["i"] for g in run[1:]}
        total += len(run)
    kept = [merged.get(f["i"], f) for f in fw if f["i"] not in drop]
    new = {f["i"]: n for n, f in enumerate(kept)}           # forward indices are list positions
    for n, f in enumerate(kept):
        fed = (f.get("rows") or {}).get("fed_next")
        f = kept[n] = dict(f, i=n)           # the recording's own forwards are not written
        if fed and fed.get("forward") is not None:
            f["rows"] = dict(f["rows"], fed_next=dict(fed, forward=new.get(fed["forward"])))
    rec = dict(rec, forwards=kept)
    return rec, {"generated": {"rounds": len(runs), "forwards": total,
                               "cloud_forwards": sum(f.get("model") == "cloud" for f in fw),
                               "own": {new[i]: v for i, v in own.items()}}}
