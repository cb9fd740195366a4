"""Where acceptance falls and stays fallen: one change-point rule for loops (the recorder's rounds)
and engines (an audit's steps pooled by context). A binomial segmentation: the split that
maximises the two-segment binomial log-likelihood ratio, kept only when the tail accepts at most
MAX_RATE of its drafts (its second half too: it stays low) after steps that accepted LOW or more.
A short dip that recovers does not win: the recovered steps weigh against it. Pure: no I/O."""
from __future__ import annotations

from math import log

MAX_RATE = 0.1        # the tail accepts at most this share of its drafts ...
LOW = 0.3             # ... after steps that accepted at least this share


def _ll(a: int, d: int) -> float:
    """The binomial log-likelihood of a accepted out of d at its own rate."""
    return sum(x * log(x / d) for x in (a, d - a) if x)


def change_point(steps: list[tuple[int, int, int]], min_before: int = 1, min_after: int = 3) -> dict | None:
    """steps: (position, drafted, accepted) in position order (several at one position: pooled).
    The sustained collapse as {position, index, rate_before, rate_after, steps_before,
    steps_after, drafted_after, drafts_wasted}, or None."""
    steps = [s for s in steps if s[1] > 0]
    d_all, a_all = sum(s[1] for s in steps), sum(s[2] for s in steps)
    best, d_b, a_b = None, 0, 0
    for i, (pos, d, a) in enumerate(steps):
        if i and pos != steps[i - 1][0] and i >= min_before and len(steps) - i >= min_after:
            d_t, a_t = d_all - d_b, a_all - a_b
            half = steps[i + (len(steps) - i) // 2:]
            if (a_t <= MAX_RATE * d_t and a_b >= LOW * d_b
                    and sum(s[2] for s in half) <= MAX_RATE * sum(s[1] for s in half)):
                llr = _ll(a_b, d_b) + _ll(a_t, d_t) - _ll(a_all, d_all)
                if best is None or llr > best[0]:
                    best = (llr, i, d_b, a_b, d_t, a_t)
        d_b, a_b = d_b + d, a_b + a
    if best is None:
        return None
    _, i, d_b, a_b, d_t, a_t = best
    return {"position": steps[i][0], "index": i, "rate_before": round(a_b / d_b, 4),
            "rate_after": round(a_t / d_t, 4), "steps_before": i, "steps_after": len(steps) - i,
            "drafted_after": d_t, "drafts_wasted": d_t - a_t}


def window_arithmetic(position: int, window: int | None, k: int) -> str | None:
    """'80 - 4 - 1 = 75' when a drafter's window explains the position (within k): the first step
    whose k drafts need a position past the window; else None."""
    if not window or not k or abs(window - k - 1 - position) > k:
        return None
    return f"{window} - {k} - 1 = {window - k - 1}"
