"""Where acceptance falls and stays fallen, for loops (the recorder's rounds) and engines (an audit's steps by
context): the split maximising the two-segment binomial log-likelihood ratio, kept when the tail (and its second
half: it stays low) accepts at most MAX_RATE of its drafts after steps that accepted LOW or more. A dip that
recovers does not win: its recovered steps weigh against it. Pure."""
from __future__ import annotations

from math import log

MAX_RATE, LOW = 0.1, 0.3


def _ll(a: int, d: int) -> float:
    return sum(x * log(x / d) for x in (a, d - a) if x)     # binomial log-likelihood at a / d


def change_point(steps: list[tuple[int, int, int]], min_before: int = 1, min_after: int = 3) -> dict | None:
    """steps: (position, drafted, accepted) in position order (several at a position: pooled) ->
    {position, index, rate_before, rate_after, steps_before, steps_after, drafts_wasted} or None.
    min_before 0: a run collapsed from its first step is one too (rate_before None) when its first
    min_after steps accept nothing (no fall to see: a drafter that never drafted, not a low one)."""
    steps = [s for s in steps if s[1] > 0]
    d_all, a_all = sum(s[1] for s in steps), sum(s[2] for s in steps)
    best, d_b, a_b = None, 0, 0
    for i, (pos, d, a) in enumerate(steps):
        half = steps[i + (len(steps) - i) // 2:]
        if (i >= min_before and (pos != steps[i - 1][0] if i else not any(s[2] for s in steps[:min_after]))
                and len(steps) - i >= min_after
                and a_all - a_b <= MAX_RATE * (d_all - d_b) and a_b >= LOW * d_b
                and sum(s[2] for s in half) <= MAX_RATE * sum(s[1] for s in half)):
            llr = _ll(a_b, d_b) + _ll(a_all - a_b, d_all - d_b) - _ll(a_all, d_all)
            best = max(best or (llr, i, d_b, a_b), (llr, i, d_b, a_b), key=lambda x: x[0])
        d_b, a_b = d_b + d, a_b + a
    if best is None:
        return None
    _, i, d_b, a_b = best
    return {"position": steps[i][0], "index": i, "rate_before": round(a_b / d_b, 4) if d_b else None,
            "rate_after": round((a_all - a_b) / (d_all - d_b), 4), "steps_before": i,
            "steps_after": len(steps) - i, "drafts_wasted": (d_all - d_b) - (a_all - a_b)}


def window_arithmetic(position: int, window: int | None, k: int) -> str | None:
    """'80 - 4 - 1 = 75' when a drafter's window explains the position (within k): the first step needing one past it."""
    return f"{window} - {k} - 1 = {window - k - 1}" if window and k and abs(window - k - 1 - position) <= k else None
