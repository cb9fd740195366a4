"""Decoding metrics (from the trace) merged with the text metrics of the final text."""
from __future__ import annotations

import math

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
        "entropy_threshold_nats": threshold_nats(trace),
        "share_above_threshold": share_above_threshold(trace),
    }
    m.update(link_metrics(trace, wall_s))
    m.update(text_metrics(trace.text))
    return m


# ---- the entropy threshold (Trace objects and trace dicts alike) ------------------------------
DRAFTED = ("accepted", "draft")   # committed sources the edge drafted (corrected/bonus: the cloud's)


def _get(obj, key, default=None):
    return obj.get(key, default) if isinstance(obj, dict) else getattr(obj, key, default)


def _number(v) -> float | None:
    """A float from a trace value (dict traces write inf as "inf"); None when it is not one."""
    if v is None or isinstance(v, bool):
        return None
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def threshold_nats(trace) -> float | None:
    """The entropy threshold the run gated on, in nats (None: no gate, every block verified).
    The decoder resolves it once per run into trace info `entropy_threshold_nats`; a trace
    without it (older files, recorded decoders) has its config's value, which is then nats."""
    info = _get(trace, "info") or {}
    if "entropy_threshold_nats" in info:
        return _number(info["entropy_threshold_nats"])
    cfg = _get(trace, "config") or {}
    if cfg.get("entropy_unit", "nats") != "nats":
        return None
    return _number(cfg.get("entropy_threshold"))


def drafted_entropies(trace) -> list[float]:
    """The draft entropy of every token the edge drafted: committed drafts (accepted by the
    cloud, or committed unverified) and rejected drafts alike."""
    recs = [t for t in _get(trace, "tokens") or [] if _get(t, "source") in DRAFTED]
    recs += list(_get(trace, "rejected") or [])
    return [e for r in recs if (e := _number(_get(r, "entropy"))) is not None]


def share_above_threshold(trace) -> float | None:
    """Share of ALL drafted tokens (committed and later rejected ones; the cloud's corrections
    and bonus tokens were never drafted) whose draft entropy exceeds the resolved threshold,
    the same strict test as the gate. None without a threshold or without drafted entropies."""
    return share_above(drafted_entropies(trace), threshold_nats(trace))


def share_above(entropies: list[float], threshold: float | None) -> float | None:
    """Share of `entropies` strictly above `threshold` (None: no threshold or no entropies)."""
    if threshold is None or not entropies:
        return None
    return round(sum(e > threshold for e in entropies) / len(entropies), 4)
