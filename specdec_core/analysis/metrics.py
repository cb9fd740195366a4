"""Decoding metrics (from the trace) merged with the text metrics of the final text."""
from __future__ import annotations

from specdec_core.analysis.textmetrics import text_metrics
from specdec_core.decoding.link import link_metrics


def compute_metrics(trace, wall_s: float, draft_forwards: int, target_forwards: int) -> dict:
    toks, rounds = trace.tokens, trace.rounds
    verified = [r for r in rounds if r.verified]
    drafted_v = sum(r.drafted for r in verified)
    accepted = sum(r.accepted for r in verified)
    by_source = {s: sum(t.source == s for t in toks) for s in ("accepted", "corrected", "draft", "bonus")}
    # per_position_acceptance[j]: of verified rounds that drafted > j tokens, the share whose
    # token j was accepted (acceptance is a prefix, so accepted > j).
    k = max((r.drafted for r in verified), default=0)
    ppa = []
    for j in range(k):
        reached = [r for r in verified if r.drafted > j]
        ppa.append(round(sum(r.accepted > j for r in reached) / len(reached), 4) if reached else None)
    n = len(toks)
    m = {
        "new_tokens": n,
        "rounds": len(rounds),
        "acceptance_rate": round(accepted / drafted_v, 4) if drafted_v else None,
        # tokens committed per cloud call: accepted + the correction or bonus token
        "mean_accepted_length": round(sum(r.committed for r in verified) / len(verified), 4) if verified else None,
        "per_position_acceptance": ppa,
        "cloud_calls": len(verified),
        "cloud_call_rate": round(len(verified) / len(rounds), 4) if rounds else 0.0,
        "target_forwards": target_forwards,
        "draft_forwards": draft_forwards,
        "corrections": by_source["corrected"],
        "bonus_tokens": by_source["bonus"],
        "draft_only_tokens": by_source["draft"],
        "accepted_tokens": by_source["accepted"],
        "rejected_tokens": len(trace.rejected),
        "tokens_per_s": round(n / wall_s, 2) if wall_s > 0 else None,
        "wall_s": round(wall_s, 4),
        "cycles": len(trace.cycles),
        "cache_desyncs": sum(w.get("kind") == "cache_desync" for w in trace.warnings),
        "ended_by": trace.ended_by,
    }
    m.update(link_metrics(trace, wall_s))
    m.update(text_metrics(trace.text))
    return m
