"""`dropped_output`: the returned ids are not the text the models were fed (a slice one token
late, a token lost joining blocks). Found where the cloud's last context and the returned ids
part by a short shift; the analysis continues on the repaired sequence (docs/recorder.md)."""
from __future__ import annotations

from specdec_core.analysis.divergence import common_prefix as _agree
from specdec_core.recorder.normalize.replayed import Tapes

MAX_SHIFT = 3
RUN = 6            # ids that must agree after the shift (fewer only when the output ends first)
MAX_EDITS = 8


def _committed(t, p: int, tok: int, greedy: bool, fed_text: list) -> bool:
    """Did the models treat `tok` at position p as committed text? The cloud row that first
    scored p-1 in the fed text's context chose it (greedy: its argmax), or it was fed at p
    AFTER that row (a correction fed back, never a rejected draft); and every model that ran
    was fed it there. (A row that scored p-1 after other, rejected drafts decides nothing.)"""
    first = min(((f.i, f.row_at(p - 1)) for f in t.fwds if f.model == "cloud" and f.rows
                 and f.row_at(p - 1) is not None and len(f.ctx) >= p
                 and f.ctx[:p] == fed_text[:p]), default=None)
    if first is None:
        return False
    fi, r = first
    chose = greedy and next(f for f in t.fwds if f.i == fi).rows["argmax"][r] == tok
    after = any(f.i > fi and p < len(f.ctx) and f.ctx[p] == tok and f.writers[p] == f.i
                for f in t.fwds)
    fed = {f.model for f in t.fwds if p < len(f.ctx) and f.ctx[p] == tok}
    return (chose or after) and fed >= {f.model for f in t.fwds}


def normalize(rec: dict, ctx):
    """(recording to analyse, notes): the recording with out_ids replaced by the text the
    models were fed when the returned ids drop (or add) committed text, and the edits
    (checks/noted/ makes them the finding)."""
    try:
        t = Tapes(list(rec["prompt_ids"] or []), list(rec["out_ids"] or []))
        t.fwds = ctx.replay(rec["forwards"])
    except Exception:       # noqa: BLE001 - build_tapes raises the user-facing error later
        return rec, {}
    clouds = [f for f in t.fwds if f.model == "cloud" and f.ctx and None not in f.ctx]
    if not clouds:
        return rec, {}
    P, gen = t.P, list(t.out)
    d = rec.get("declared", {})
    greedy = d.get("verify", "greedy") == "greedy" and not d.get("temperature")
    M = max(clouds, key=lambda f: (len(f.ctx), f.i)).ctx[P:]
    out, edits, i = _align(t, gen, M, greedy)
    if not edits:
        return rec, {}
    fixed = out + gen[i:]
    return dict(rec, out_ids=fixed, returned_ids=gen), {"dropped": {"edits": edits, "P": P}}


def _align(t, gen: list, M: list, greedy: bool):
    """Walk the returned ids `gen` along the fed text `M`: (fed text so far, edits, index in
    gen) where ids were dropped from or added to what the models were fed."""
    out, edits, i = [], [], 0          # i: index in gen; len(out) is the index in M
    while i < len(gen) and len(edits) < MAX_EDITS:
        a = _agree(gen[i:], M[len(out):])
        out += gen[i:i + a]
        i += a
        j = len(out)
        if i >= len(gen) or j >= len(M):
            break
        found = _shift(t, gen, M, i, j, greedy)
        if found is None:
            break
        kind, d = found
        if kind == "dropped":
            edits.append({"kind": kind, "index": j, "ids": M[j:j + d]})
            out += M[j:j + d]
        else:
            edits.append({"kind": kind, "index": i, "ids": gen[i:i + d]})
            i += d
    return out, edits, i


def _shift(t, gen: list, M: list, i: int, j: int, greedy: bool):
    """("dropped" | "added", d) that realigns gen[i:] with M[j:], or None."""
    P = t.P
    for d in range(1, MAX_SHIFT + 1):
        need = min(RUN, len(gen) - i)
        if j >= d and M[j:j + d] == M[j - d:j]:
            return None     # the models were fed a token/block twice: a context finding's case
        if need >= 2 and _agree(gen[i:], M[j + d:]) >= need and all(
                _committed(t, P + j + x, M[j + x], greedy, t.prompt + M) for x in range(d)):
            return ("dropped", d)
        need = min(RUN, len(gen) - i - d)
        if need >= 2 and _agree(gen[i + d:], M[j:]) >= need and not any(
                P + j < len(f.ctx) and f.ctx[P + j] == g for f in t.fwds for g in gen[i:i + d]):
            return ("added", d)
    return None
