"""`verify_generates` (issue 48, item 1): a verifier that generates its tokens one forward each
instead of scoring the block in one (normalize/generated.py merged its forwards into rounds).
Lossless, so a warning with its measured cost: target forwards per output token against
1/(accepted + 1), what one scoring forward per round would take."""
from __future__ import annotations

from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check, ev


@check("verify_generates", order=160)
def verify_generates(e) -> list:
    g = e.notes.get("generated")
    n = len(e.t.out)
    if not g or not n:
        return []
    F = g["cloud_forwards"]
    vr = [r for r in e.rounds if r.verified]
    R = sum(f.model == "cloud" for f in e.t.fwds)          # one per round (and any other call)
    acc = sum(r.accepted for r in vr) / max(1, len(vr))
    return [finding(
        "verify_generates", f"the cloud generated its tokens one forward each: {F} target forwards "
        f"for {n} output tokens ({F / n:.2f} per token)",
        f"{g['rounds']} rounds verified by {g['forwards']} cloud forwards (all but the first of each fed one token); decoding with the "
        f"cloud alone takes 1.00 forward per token, scoring each block in one forward would take {R} "
        f"({R / n:.2f} per token = 1/(accepted + 1) with {acc:.2f} drafts accepted per round)",
        "the verifier asks the cloud for its own continuation (generate / an API with max_tokens = "
        "k + 1) and compares it with the drafts, instead of scoring the drafted block in one forward",
        "feed the cloud the unseen committed ids plus the whole block in one forward; accept while "
        "each draft is the cloud's choice from the row before it, and take the correction or bonus "
        "from the same forward",
        ev(model="cloud", target_forwards=F, output_tokens=n, scoring_forwards=R, rounds=g["rounds"],
           forwards_per_token=round(F / n, 3), scoring_per_token=round(R / n, 3)))]
