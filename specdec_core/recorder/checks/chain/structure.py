"""The loop's structure against the declared k: `draft_schedule` (the decoder chooses its draft
length) or `off_by_one` (a round drafted more than k or committed more than k+1)."""
from __future__ import annotations

from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check, ev


@check("draft_schedule", "off_by_one", scope="row", order=100)
def structure(e) -> list:
    k, vr = e.declared.get("k"), [r for r in e.rounds if r.verified]
    if not k or e.declared.get("entropy_threshold") is not None:   # a gate verifies several
        return []          # confident blocks in one forward: its rounds are longer than k by design
    long = [r for r in vr if len(r.block) > k]
    runs = [r for r in vr if (r.end - r.block_start) > k + 1]
    sizes = sorted({len(r.block) for r in vr if r.block})
    if long and max(sizes) > k + 1:      # lengths vary past k+1: a schedule, not a slip
        return [finding(
            "draft_schedule", f"draft length varies from {sizes[0]} to {sizes[-1]} per round (declared k={k})",
            f"{len(long)} of {len(vr)} rounds drafted more than k",
            "the decoder chooses the draft length itself (e.g. transformers' heuristic "
            "num_assistant_tokens schedule or a confidence threshold); k is not what it drafts",
            "nothing to fix if intended; declare the schedule's maximum as k to compare",
            ev(long[0].cloud, long[0].block_start, long[0].block, round=long[0].n))]
    if not (long or runs):
        return []
    r = (long or runs)[0]
    return [finding(
        "off_by_one", f"round {r.n} drafted {len(r.block)} and committed {r.end - r.block_start} tokens "
        f"with k={k}",
        f"{len(long)} round(s) drafted more than k, {len(runs)} committed more than k+1",
        "an off-by-one in the draft loop or the acceptance count (range(k + 1), "
        "accepting one token past the first mismatch)",
        "draft exactly k tokens; commit the accepted prefix plus one cloud token",
        ev(r.cloud, r.block_start, r.block, round=r.n))]
