"""Normalize a drafter's input shift (issue 41): EAGLE feeds its head `input_ids[:, 1:]`, so at
head position t the head sees the cloud's feature of t with the token t+1, one position behind
our layout (position q: token q, feature of q-1). The head hooks decide per recording which
layout explains the fed ids and features (recorder/observe/head_hooks.py `_decide`, kept as
`features.shift = 1` on each head forward); here every such forward is rewritten in our
coordinates (cache length, positions, mask columns and slots one further; the first forward gets
the prompt's first id in front, which the loop fed to no head row), so tapes, rounds and checks
read it as any head. The raw values are kept under `raw`."""
from __future__ import annotations

import copy

from specdec_core.analysis.divergence import common_prefix

KEYS = ("ids", "cache_len", "position_ids", "cache_position", "mask_shape", "mask_rows",
        "slot_moves")


def _plus(v):
    return None if v is None else [x + 1 for x in v]


def _one(f: dict, first: int) -> None:
    f["raw"] = {k: copy.deepcopy(f.get(k)) for k in KEYS if f.get(k) is not None}
    if not f.get("cache_len"):          # the head's first forward: position 0 was never fed
        f["ids"] = [first] + list(f.get("ids") or [])
        if f.get("rows"):
            f["rows"]["offset"] += 1
        pos = f.get("position_ids")
        f["position_ids"] = None if pos is None else [0] + _plus(pos)
    else:
        f["cache_len"] += 1
        f["position_ids"] = _plus(f.get("position_ids"))
    f["cache_position"] = _plus(f.get("cache_position"))
    if f.get("cache_position") is not None and not f["raw"].get("cache_len"):
        f["cache_position"] = [0] + f["cache_position"]
    if f.get("mask_shape"):
        f["mask_shape"] = f["mask_shape"][:-1] + [f["mask_shape"][-1] + 1]
    m = f.get("mask_rows")
    if m:
        f["mask_rows"] = {"from": m["from"] + 1, "rows": [_plus(r) for r in m["rows"]]}
    if f.get("slot_moves"):
        f["slot_moves"] = [[a + 1, b + 1 if b >= 0 else b] for a, b in f["slot_moves"]]


def _shifted(group: list[dict], C: list[int]) -> bool:
    """A head: the hooks' verdict (ids and features). Any other drafter (an edge model fed what
    EAGLE feeds its head): its first forward's ids are C[1:] rather than C, by 2+ ids."""
    heads = [f for f in group if f.get("features")]
    if heads:
        return any(f["features"].get("shift") == 1 for f in heads)
    first = min(group, key=lambda f: f.get("cache_len") or 0)
    if first.get("cache_len"):
        return False
    ids = first.get("ids") or []
    a0, a1 = common_prefix(ids, C), common_prefix(ids, C[1:])
    return a1 >= max(a0 + 2, 4)


def normalize(rec: dict, ctx=None) -> tuple[dict, dict]:
    """-> (recording in our layout, notes: none): nothing changes unless a drafter's forwards were
    seen fed shifted by one (per cache: one layout per drafting cache)."""
    C = list(rec.get("prompt_ids") or []) + list(rec.get("out_ids") or [])
    groups: dict = {}
    for f in rec.get("forwards", []):
        if f.get("model") == "edge" and f.get("module") != "cloud" and f.get("ids"):
            groups.setdefault(f["cache"] if f.get("cache") is not None else ("free", f["i"]), []).append(f)
    moved = {f["i"] for g in groups.values() if _shifted(g, C) for f in g}
    if not moved:
        return rec, {}
    rec = dict(rec)
    rec["forwards"] = [copy.deepcopy(f) if f["i"] in moved else f for f in rec["forwards"]]
    first = C[0] if C else -1
    for f in rec["forwards"]:
        if f["i"] in moved:
            _one(f, first)
    rec["input_shift"] = {"forwards": len(moved)}
    return rec, {}
