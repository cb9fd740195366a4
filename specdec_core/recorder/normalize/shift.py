"""Normalize a drafter's input shift (issue 41; docs/recorder.md, "Pipeline", `shift.py`): EAGLE
feeds its head `input_ids[:, 1:]`, one position behind our layout (position q: token q, feature of
q-1). Each forward marked `features.shift = 1` (head_hooks.py `_decide`) is rewritten in our
coordinates; the raw values are kept under `raw`."""
from __future__ import annotations

import copy

from specdec_core.analysis.divergence import common_prefix

KEYS = ("ids", "cache_len", "position_ids", "cache_position", "mask_shape", "mask_rows",
        "slot_moves", "rows")


def _plus(v, o: int):
    return None if v is None else [x + o for x in v]


def move(f: dict, o: int, C: list, absolute: bool = False) -> None:
    """Rewrite forward `f` (a copy) o positions further, its fed values kept under `raw` (the
    layouts: EAGLE's shift here, o = 1; a sliding window, window.py): the first forward of its
    cache gets C[:o] in front (fed to no row), a later one o more cached; positions move by o
    (`absolute`: positions already counted from the text's start are kept), the first forward's
    get 0..o-1 in front; the mask's width, its columns and the moved slots move by o."""
    f["raw"] = {k: copy.deepcopy(f.get(k)) for k in KEYS if f.get(k) is not None}
    first = not f.get("cache_len")
    if first:
        f["ids"] = C[:o] + list(f.get("ids") or [])
        if f.get("rows"):
            f["rows"] = dict(f["rows"], offset=f["rows"]["offset"] + o)
    else:
        f["cache_len"] += o
    for key in ("position_ids", "cache_position"):
        if f.get(key):
            f[key] = (list(range(o)) if first else []) + _plus(f[key], 0 if absolute else o)
    if f.get("mask_shape"):
        f["mask_shape"] = f["mask_shape"][:-1] + [f["mask_shape"][-1] + o]
    m = f.get("mask_rows")
    if m:
        f["mask_rows"] = {"from": m["from"] + o, "rows": [_plus(r, o) for r in m["rows"]]}
    if f.get("slot_moves"):
        f["slot_moves"] = [[a + o, b + o if b >= 0 else b] for a, b in f["slot_moves"]]


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
    fwds = [copy.deepcopy(f) if f["i"] in moved else f for f in rec["forwards"]]
    for f in fwds:
        if f["i"] in moved:
            move(f, 1, C or [-1])
    return dict(rec, forwards=fwds, input_shift={"forwards": len(moved)}), {}
