"""The loop's structure against the declared k: `draft_schedule` (the decoder chooses its draft
length) or `off_by_one` (a round drafted more than k or committed more than k+1)."""
from __future__ import annotations

from specdec_core.findings import finding
from specdec_core.recorder.checks.chain.context import _ev
from specdec_core.recorder.checks.registry import check


@check("draft_schedule", "off_by_one", scope="row", order=100)
def structure(e) -> list:
    rounds, out, k = e.rounds, [], e.declared.get("k")
    if k and e.declared.get("entropy_threshold") is None:   # a gate verifies
        # several confident blocks in one forward: its rounds are longer than k by design
        long = [r for r in rounds if r.verified and len(r.block) > k]
        runs = [r for r in rounds if r.verified and (r.end - r.block_start) > k + 1]
        sizes = sorted({len(r.block) for r in rounds if r.verified and r.block})
        if long and max(sizes) > k + 1:      # lengths vary past k+1: a schedule, not a slip
            out.append(finding(
                "draft_schedule", f"draft length varies from {sizes[0]} to {sizes[-1]} per round (declared k={k})",
                f"{len(long)} of {sum(r.verified for r in rounds)} rounds drafted more than k",
                "the decoder chooses the draft length itself (e.g. transformers' heuristic "
                "num_assistant_tokens schedule or a confidence threshold); k is not what it drafts",
                "nothing to fix if intended; declare the schedule's maximum as k to compare",
                _ev(long[0].cloud, long[0].block_start, long[0].block, round=long[0].n)))
        elif long or runs:
            r = (long or runs)[0]
            out.append(finding(
                "off_by_one", f"round {r.n} drafted {len(r.block)} and committed {r.end - r.block_start} tokens "
                f"with k={k}",
                f"{len(long)} round(s) drafted more than k, {len(runs)} committed more than k+1",
                "an off-by-one in the draft loop or the acceptance count (range(k + 1), "
                "accepting one token past the first mismatch)",
                "draft exactly k tokens; commit the accepted prefix plus one cloud token",
                _ev(r.cloud, r.block_start, r.block, round=r.n)))
    return out
