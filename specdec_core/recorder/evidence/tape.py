"""Reconstruction, step 1: per cache, the tape of what it held at every forward (the forwards
replayed: normalize/replayed.py), read against the committed sequence (docs/recorder.md,
"Reconstruction")."""
from __future__ import annotations

import math

from specdec_core.analysis.divergence import common_prefix
from specdec_core.recorder.normalize.replayed import (BUILDS, Fwd, RecordingError, Tapes,  # noqa: F401
                                                      replay)
from specdec_core.recorder.observe.hooks import SCHEMA


def build_tapes(rec: dict, fwds: list | None = None) -> Tapes:
    """The tapes of a recording; `fwds`: its forwards already replayed (`replay`)."""
    if not isinstance(rec, dict) or rec.get("schema") != SCHEMA:
        raise RecordingError(f"not a SpecScope recording (expected schema {SCHEMA!r})")
    BUILDS["tapes"] += 1
    t = Tapes(list(rec["prompt_ids"] or []), list(rec["out_ids"] or []),
              temperature=float((rec.get("declared") or {}).get("temperature") or 0.0))
    for f in replay(rec["forwards"]) if fwds is None else fwds:
        ids = f.raw.get("ids") or []
        if f.L == 0 and f.model != "cloud" and f.model not in t.own_prompt and len(ids) >= t.P:
            t.own_prompt[f.model] = list(ids[:t.P]) if list(ids[:t.P]) != t.prompt else None
        f.match = common_prefix(f.ctx, t.ref(f.model))
        t.fwds.append(f)
    decide(t)
    return t


def decide(t: Tapes) -> None:
    """position -> (cloud forward, row) of its first decision; rows past the loop's own
    correction (`t.resumed`, evidence/resumed.py) decide nothing."""
    C = t.C
    t.decided = {}
    for f in t.fwds:
        if f.model == "cloud" and f.rows:
            cut = t.resumed.get(f.i, math.inf)
            for q in f.row_positions():
                if q + 1 <= f.match and q + 1 >= t.P and q + 1 < len(C) + 1 and q < cut:
                    t.decided.setdefault(q + 1, (f.i, q - f.first_q))
