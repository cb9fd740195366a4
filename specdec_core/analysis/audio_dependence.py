"""Acceptance split by audio dependence, and the `edge_mishears` finding (pure functions).

A drafted token is judged at the position it was drafted for (a rejected draft at its
correction's position). Definitions follow the serving engines (analysis/glossary.py,
docs/metrics.md). Works on Trace objects and trace dicts alike."""
from __future__ import annotations

import math

from scipy.stats import fisher_exact

# A position is audio-dependent when taking the audio away moves the cloud's next-token
# distribution by more than this (nats); why 0.5: docs/metrics.md, "Audio dependence".
THRESHOLD_NATS = 0.5

# edge_mishears: rejection on audio-dependent drafts vs the others, one-sided Fisher exact test,
# with at least this much evidence and this large an effect (measured: docs/metrics.md).
MIN_JUDGED = 5          # judged audio-dependent drafts at least
MAX_P = 0.01
MIN_RATIO = 2.0         # audio rejection rate at least this many times the others'
MIN_DIFF = 0.25         # and at least this many points above it
# ... and the rejected audio-dependent drafts are the cloud's audio-free choice this often
# (what tells an edge that never got the audio from a weaker one: docs/metrics.md)
MIN_MATCHES = 2
MIN_MATCH_SHARE = 0.4


def _get(obj, key, default=None):
    """A field of a trace part, a dict or an object alike (metrics.py and acceptance.py use it)."""
    return obj.get(key, default) if isinstance(obj, dict) else getattr(obj, key, default)


def has_dependence(trace) -> bool:
    return any(_get(t, "audio_dependence") is not None for t in _get(trace, "tokens") or [])


def attach(trace, dep: dict | None) -> None:
    """Set each committed token's audio_dependence and audio_free_id (Trace objects) from
    decoding/dependence.py's result, and the metric built on them."""
    if not dep:
        return
    for t, v, a in zip(trace.tokens, dep["values"], dep["audio_free_ids"]):
        t.audio_dependence, t.audio_free_id = v, a
    trace.metrics["acceptance_by_dependence"] = acceptance_by_dependence(trace)


def judged_drafts(trace) -> list[tuple[int, int, bool, float]]:
    """(round, slot, accepted, dependence) of every draft the cloud judged."""
    out, slot, last = [], 0, None
    for t in _get(trace, "tokens") or []:
        rnd, src = _get(t, "round"), _get(t, "source")
        if rnd != last:
            slot, last = 0, rnd
        dep = _get(t, "audio_dependence")
        if src in ("accepted", "corrected") and dep is not None:
            out.append((rnd, slot, src == "accepted", float(dep)))
        slot += 1
    return out


def _class_stats(judged, rounds_drafted: dict) -> dict:
    acc = sum(a for _, _, a, _ in judged)
    n = len(judged)
    rounds = {r for r, _, _, _ in judged}
    k = max((s for _, s, _, _ in judged), default=-1) + 1
    ppa = []
    for j in range(k):
        at = [a for _, s, a, _ in judged if s == j]
        ppa.append(round(sum(at) / len(at), 4) if at else None)
    return {"judged": n, "accepted": acc, "rejected": n - acc,
            "drafts": sum(rounds_drafted.get(r, 0) for r in rounds),
            "acceptance_rate": round(acc / n, 4) if n else None,
            "mean_accepted_length": round(1 + acc / len(rounds), 4) if rounds else None,
            "rounds": len(rounds), "per_position_acceptance": ppa}


def acceptance_by_dependence(trace, threshold: float = THRESHOLD_NATS) -> dict | None:
    """{"threshold_nats", "audio": {...}, "other": {...}} or None without audio dependence.
    `drafts`: all drafted tokens of the rounds counted in the class (vLLM's num_draft_tokens)."""
    if not has_dependence(trace):
        return None
    judged = judged_drafts(trace)
    drafted = {_get(r, "round"): _get(r, "drafted", 0) for r in _get(trace, "rounds") or []
               if _get(r, "verified")}
    return {"threshold_nats": threshold,
            "audio": _class_stats([j for j in judged if j[3] > threshold], drafted),
            "other": _class_stats([j for j in judged if j[3] <= threshold], drafted)}


def audio_free_drafts(trace, threshold: float = THRESHOLD_NATS) -> tuple[int, int]:
    """(rejected drafts at audio-dependent positions, how many of them are exactly the token
    the cloud picks there WITHOUT the audio). An edge that hears the clip but less well misses
    in many directions; an edge that never got the audio drafts the audio-free choice."""
    toks = _get(trace, "tokens") or []
    first = {}
    for r in _get(trace, "rejected") or []:
        first.setdefault((_get(r, "round"), _get(r, "at")), _get(r, "id"))
    n = hit = 0
    for (_, at), tid in first.items():
        if at is None or not 0 <= at < len(toks):
            continue
        dep, free = _get(toks[at], "audio_dependence"), _get(toks[at], "audio_free_id")
        if dep is not None and dep > threshold:
            n += 1
            hit += free is not None and tid == free
    return n, hit


def mishear_test(split: dict | None, trace) -> dict | None:
    """The evidence for `edge_mishears` (rejection rates of both classes, Fisher's one-sided p, the
    audio-free rejections) where it holds: drafts at audio-dependent positions rejected much more
    often, with enough evidence, and the rejected drafts what the cloud says without the audio."""
    if not split:
        return None
    a, o = split["audio"], split["other"]
    if not a["judged"] or not o["judged"]:
        return None
    ra, ro = a["rejected"] / a["judged"], o["rejected"] / o["judged"]
    _, p = fisher_exact([[a["rejected"], a["accepted"]], [o["rejected"], o["accepted"]]],
                        alternative="greater")
    n, hit = audio_free_drafts(trace, split["threshold_nats"])
    t = {"audio_rejection": round(ra, 4), "other_rejection": round(ro, 4),
         "audio_judged": a["judged"], "other_judged": o["judged"], "p_value": float(p),
         "ratio": round(ra / ro, 2) if ro else math.inf,
         "audio_rejected": n, "audio_free_matches": hit}
    holds = (t["audio_judged"] >= MIN_JUDGED and t["p_value"] <= MAX_P and t["ratio"] >= MIN_RATIO
             and t["audio_rejection"] - t["other_rejection"] >= MIN_DIFF
             and hit >= MIN_MATCHES and hit >= MIN_MATCH_SHARE * n)
    return t if holds else None


CAUSE = ("the edge does not hear the clip as well as the cloud, or does not get the audio at all "
         "(HF assisted generation on Omni drops input_features for the assistant model)")
FIX = ("share the cloud's audio encoding with the edge; verify every block on audio-dependent "
       "spans; gate the cloud call on audio dependence instead of draft entropy")


def _sampled(trace) -> bool:
    return float((_get(trace, "config") or {}).get("temperature") or 0) > 0


def check_edge_mishears(trace) -> list[dict]:
    """[the warning] when drafts at audio-dependent positions are rejected much more often than the
    others, with enough evidence, and the rejected ones are the cloud's audio-free choice; [] else.
    Greedy runs only: under sampling the p/q overlap is lower at high-entropy positions for any edge."""
    if _sampled(trace):
        return []
    split = acceptance_by_dependence(trace)
    t = mishear_test(split, trace)
    if t is None:
        return []
    title = (f"edge mishears: {t['audio_rejection']:.0%} of audio-dependent drafts rejected vs "
             f"{t['other_rejection']:.0%} of the others")
    detail = (f"{t['audio_judged']} judged drafts where the cloud depends on the audio "
              f"(> {split['threshold_nats']:g} nats) vs {t['other_judged']} others; "
              f"{t['ratio']:g}x the rejection rate, Fisher exact p = {t['p_value']:.1g}; "
              f"{t['audio_free_matches']} of the {t['audio_rejected']} rejected ones are exactly "
              "what the cloud says at that position without the audio")
    from specdec_core.findings import finding

    return [finding("edge_mishears", title, detail, CAUSE, FIX, t)]


def pooled(traces: list) -> dict:
    """Several runs' trace dicts as one (tokens, rejected and rounds renumbered so that rounds and
    positions never collide): the evidence of edge_mishears over a set of clips."""
    out = {"tokens": [], "rejected": [], "rounds": []}
    for tr in traces:
        base, rbase = len(out["tokens"]), len(out["rounds"]) and max(r["round"] for r in out["rounds"]) + 1
        out["tokens"] += [dict(t, i=base + n, round=rbase + _get(t, "round", 0))
                          for n, t in enumerate(_get(tr, "tokens") or [])]
        out["rejected"] += [dict(r, round=rbase + _get(r, "round", 0),
                                 at=None if _get(r, "at") is None else base + r["at"])
                            for r in _get(tr, "rejected") or []]
        out["rounds"] += [dict(r, round=rbase + _get(r, "round", 0)) for r in _get(tr, "rounds") or []]
    return out


def pooled_edge_mishears(traces: list) -> list[dict]:
    """edge_mishears over several clips together (one clip often has too few audio-dependent
    drafts for the test); [] with fewer than two traces."""
    traces = [t for t in traces if t and has_dependence(t)]
    if len(traces) < 2 or any(_sampled(t) for t in traces):
        return []
    found = check_edge_mishears(pooled(traces))
    for f in found:
        f["title"] += f" (over {len(traces)} clips)"
    return found
