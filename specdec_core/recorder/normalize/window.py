"""Normalize a drafter fed a sliding WINDOW of the committed text (issue 48, item 2; docs/recorder.md,
"Layouts of 2026's loops"): a fresh cache each round and the last W committed ids. A consistent
window is a layout, like EAGLE's shift, rewritten in our coordinates; a window that is not a slice
of the committed text is left as it is for the context checks. The raw values are kept under `raw`."""
from __future__ import annotations

import copy

from specdec_core.recorder.normalize.shift import move


def _start(ids: list, C: list, after: int) -> int | None:
    """The first o >= after (o > 0) with C[o:o+n] == ids, where C[:n] != ids; else None."""
    n = len(ids)
    if n < 2 or C[:n] == ids:
        return None
    return next((o for o in range(max(after, 1), len(C) - n + 1) if C[o:o + n] == ids), None)


def normalize(rec: dict, ctx=None) -> tuple[dict, dict]:
    """-> (recording in our layout, notes: {"window": {"forwards": n}} where one was read; a
    window is a layout, not a bug: no check turns it into a finding)."""
    C = list(rec.get("prompt_ids") or []) + list(rec.get("out_ids") or [])
    fw = rec.get("forwards") or []
    if not any(f.get("model") == "edge" and not f.get("cache_len") and _start(f.get("ids") or [], C, 0)
               for f in fw if (f.get("batch") or 1) <= 1):
        return rec, {}
    rec = dict(rec, forwards=[copy.deepcopy(f) for f in fw])
    live, last, n = {}, 0, 0           # cache key -> (window start, absolute positions)
    for f in rec["forwards"]:
        if f.get("model") != "edge" or not f.get("ids") or f.get("features"):
            continue
        key = f.get("cache")
        if not f.get("cache_len"):
            live.pop(key, None)
            o = _start(f["ids"], C, last)
            if o is None:
                continue
            pos = f.get("position_ids") or f.get("cache_position")
            live[key], last, n = (o, bool(pos) and pos[0] != 0), o, n + 1
        elif key not in live:
            continue
        move(f, live[key][0], C, live[key][1])
    return rec, ({"window": {"forwards": n}} if n else {})
