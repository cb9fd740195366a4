"""Decoding metrics (from the trace) merged with the text metrics of the final text."""
from __future__ import annotations

import math

from specdec_core.analysis.audio_dependence import _get, acceptance_by_dependence
from specdec_core.analysis.textmetrics import text_metrics
from specdec_core.decoding.link import link_metrics


def compute_metrics(trace, wall_s: float, draft_forwards: int, target_forwards: int) -> dict:
    toks, rounds = trace.tokens, trace.rounds
    verified = [r for r in rounds if r.verified]
    drafted_v = sum(r.drafted for r in verified)
    accepted = sum(r.accepted for r in verified)
    by_source = {s: sum(t.source == s for t in toks) for s in ("accepted", "corrected", "draft", "bonus")}
    ppa = [round(a / d, 4) for d, a in by_position([(r.accepted, r.drafted) for r in verified])]
    n = len(toks)
    m = {
        "new_tokens": n,
        "rounds": len(rounds),
        "acceptance_rate": round(accepted / drafted_v, 4) if drafted_v else None,
        "mean_accepted_length": mean_accepted_length(verified),
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
        # of ALL drafted tokens (committed and later rejected; the cloud's corrections and bonus
        # tokens were never drafted): the share whose draft entropy exceeds the threshold
        "share_above_threshold": share_above(drafted_entropies(trace), threshold_nats(trace)),
        # None where the backend cannot take the audio away (decoding/dependence.py)
        "acceptance_by_dependence": acceptance_by_dependence(trace),
    }
    m["time_split"] = time_split(rounds, wall_s)
    m.update(tree_metrics(rounds))
    if m["acceptance_by_depth"]:   # a tree's draft positions are its depths, not its sibling slots
        m["per_position_acceptance"] = m["acceptance_by_depth"]
    m.update(link_metrics(trace, wall_s))
    m.update(text_metrics(trace.text))
    return m


def by_position(steps) -> list[tuple[int, int]]:
    """(drafted, accepted) at draft position j = 1..k over (accepted, drafted) steps: the steps
    that drafted a j-th token and those whose j-th was accepted (acceptance is a prefix, so
    accepted >= j). Our rounds (per_position_acceptance) and a served engine's steps alike."""
    k = max((d for _, d in steps), default=0)
    return [(sum(d >= j for _, d in steps), sum(min(a, d) >= j for a, d in steps)) for j in range(1, k + 1)]


def mean_accepted_length(verified) -> float | None:
    """1 + accepted / cloud calls (vLLM's mean acceptance length: the accepted drafts plus the
    cloud's one token per call), at most k + 1. Counted from what the cloud checked, not from
    what was committed: a faulty commit that appends extra, unchecked tokens (input_corruption)
    must not raise it, nor a last round cut by the length limit lower it."""
    if not verified:
        return None
    return round(1 + sum(r.accepted for r in verified) / len(verified), 4)


# ---- where the time goes ----------------------------------------------------------------------
def time_split(rounds, wall_s: float, edge_s: float | None = None, cloud_s: float | None = None,
               caller_s: float = 0.0, recorder_s: float | None = None) -> dict:
    """A decode's wall time split: the edge's forwards, the cloud's, remote cloud requests (request_s)
    and `other_s` (the loop's Python, sampling, logits processing, tracing). Totals default to the
    sums over the rounds; the decoder passes its runners' totals (which also count forwards outside
    a finished round). `caller_s` (the caller holding a streamed decode) and `recorder_s` (the
    recorder's hooks) are apart, so that `other_s` is the loop's own.
    edge + cloud + remote + other (+ caller + recorder) = total = wall_s;
    other_share = other / (total - caller - recorder)."""
    total = float(wall_s or 0.0)

    def summed(key):
        return sum(_number(_get(r, key)) or 0.0 for r in rounds or [])

    edge = summed("edge_s") if edge_s is None else edge_s
    cloud = summed("cloud_s") if cloud_s is None else cloud_s
    rec = summed("recorder_s") if recorder_s is None else recorder_s
    remote = summed("request_s")
    other = total - edge - cloud - remote - caller_s - rec
    own = total - caller_s - rec
    d = {"edge_s": round(edge, 6), "cloud_s": round(cloud, 6), "remote_s": round(float(remote), 6),
         "other_s": round(other, 6), "total_s": round(total, 6)}
    if caller_s:
        d["caller_s"] = round(caller_s, 6)
    if rec:
        d["recorder_s"] = round(rec, 6)
    d["other_share"] = round(other / own, 4) if own > 0 else None
    return d


def round_split(r) -> dict:
    """One round's time split (a RoundRecord or a trace dict round): edge, cloud, remote,
    recorder and other = round_s minus those."""
    g = lambda k: _number(_get(r, k)) or 0.0  # noqa: E731
    out = {"edge_s": g("edge_s"), "cloud_s": g("cloud_s"), "remote_s": g("request_s"),
           "recorder_s": g("recorder_s")}
    out["other_s"] = g("round_s") - sum(out.values())
    out["round_s"] = g("round_s")
    return out


def time_line(split: dict | None) -> str:
    """`time: 0.81 s = edge 0.32 s (39%) · cloud 0.41 s (51%) · other 0.08 s (9%)`: where a
    decode's wall time went (analysis.metrics.time_split); empty without one."""
    if not split or not split.get("total_s"):
        return ""
    total = split["total_s"]
    parts = [(name, split.get(f"{name}_s") or 0.0) for name in ("edge", "cloud", "remote")]
    parts = [p for p in parts if p[1] or p[0] != "remote"]
    parts += [("other", split.get("other_s") or 0.0)]
    parts += [(n, split[f"{n}_s"]) for n in ("recorder", "caller") if split.get(f"{n}_s")]
    body = " · ".join(f"{n} {v:.3f} s ({v / total:.0%})" for n, v in parts)
    return f"time: {total:.3f} s = {body}"


# ---- the entropy threshold (Trace objects and trace dicts alike) ------------------------------
DRAFTED = ("accepted", "draft")   # committed sources the edge drafted (corrected/bonus: the cloud's)


def tree_metrics(rounds) -> dict:
    """Tree rounds (RoundRecords or trace dicts): draft nodes the cloud verified per call, and
    acceptance by depth d = of the rounds whose path reached d - 1 and whose tree has a node at
    depth d, the share that accepted one (EAGLE's per-depth acceptance). None for chains."""
    trees = [t for t in (_get(r, "tree") for r in rounds or []) if t]
    if not trees:
        return {"nodes_per_call": None, "acceptance_by_depth": None}
    deep = max(max((n["depth"] for n in t["nodes"]), default=0) for t in trees)
    by_depth = []
    for d in range(1, deep + 1):
        reached = [t for t in trees if len(t["path"]) >= d - 1 and any(n["depth"] == d for n in t["nodes"])]
        by_depth.append(round(sum(len(t["path"]) >= d for t in reached) / len(reached), 4) if reached else None)
    return {"nodes_per_call": round(sum(len(t["nodes"]) for t in trees) / len(trees), 4),
            "acceptance_by_depth": by_depth}


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
    """The entropy threshold the run gated on, in nats (None: no gate). A trace without the decoder's
    `entropy_threshold_nats` (older files, recorded decoders) has its config's value, then nats."""
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


def share_above(entropies: list[float], threshold: float | None) -> float | None:
    """Share of `entropies` strictly above `threshold`, the same strict test as the gate (None:
    no threshold or no entropies)."""
    if threshold is None or not entropies:
        return None
    return round(sum(e > threshold for e in entropies) / len(entropies), 4)
