"""`verify_rows_misaligned` (issue 56): a verify forward that returns one row per draft and none
for the slot before the block (`logits_to_keep=k` where k + 1 rows are needed). Its row i is
the cloud's choice AFTER draft i; a loop that reads it as the choice AT draft i is one slot off:
its corrections are the argmax of the row of their own position (evidence/rounds.py reads these
forwards as verifies, `Round.misaligned`)."""
from __future__ import annotations

from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check, ev


@check("verify_rows_misaligned", scope="row", order=3)
def verify_rows(e) -> list[dict]:
    bad = [rnd for rnd in e.rounds if rnd.misaligned]
    if not bad:
        return []
    C, texts = e.t.C, e.texts
    off = [(rnd, c) for rnd in bad if (c := rnd.extra) is not None and rnd.cloud.row_at(c) is not None
           and rnd.cloud.rows["argmax"][rnd.cloud.row_at(c)] == C[c]]
    rnd = (off or [(bad[0], None)])[0][0]
    f, k = rnd.cloud, len(rnd.block)
    where = (f"round {rnd.n}: the id committed at position {off[0][1]} ({texts(C[off[0][1]])!r}) is the "
             f"argmax of the row that scored position {off[0][1]} (the cloud's choice for the next slot)"
             if off else f"round {rnd.n}: verify forward {f.i}")
    return [finding(
        "verify_rows_misaligned", f"{len(bad)} verify forwards return one row per draft, none for the "
        f"slot before the block: rows read one slot off",
        f"verify forward {f.i} was fed {k} drafts and returned {len(f.rows['argmax'])} rows, the first "
        f"scoring the first draft's own position {f.first_q}; {where}; {len(off)} of {len(bad)} "
        "corrections are the argmax of the row one slot after theirs",
        "the verify keeps k rows for k drafts (logits_to_keep = k, or logits[-k:]): row i is the "
        "cloud's choice after draft i, read as its choice at draft i (slot offset +1), and the row "
        "that judges the first draft is missing",
        "keep k + 1 rows (logits_to_keep = len(draft) + 1, logits[-(k + 1):]): row i judges draft "
        "i, the last row is the bonus",
        ev(f, rnd.block_start, rnd.block, slot_offset=1, rows=len(f.rows["argmax"]), drafts=k,
           n_verifies=len(bad), n_off=len(off)))]
