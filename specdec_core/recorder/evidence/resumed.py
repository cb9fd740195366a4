"""Where the loop itself resumed after a verification (issue 42; docs/recorder.md, "Where the
loop resumed": a sampled correction equal to the rejected draft reads as an acceptance). With a
declared T > 0, `build_rounds` reads it round by round and keeps `t.resumed` = {verify forward:
the position of the loop's own correction}; the round's `accepted` and the tapes' `decided` read
its rows past that position as unused. Whether the repeat was allowed is for the checks to say."""
from __future__ import annotations

def _next(t, k: int, cached_edge: bool):
    """After t.fwds[k]: (the drafter's first forward before the next cloud forward with rows,
    that cloud forward)."""
    edge = None
    for f in t.fwds[k + 1:]:
        if f.model == "cloud" and f.rows:
            return edge, f
        if (edge is None and f.model == "edge" and f.rows and f.n
                and (f.raw.get("cache") is not None or not cached_edge)):
            edge = f
    return edge, None


def resumed(t, rnd, k: int, cached_edge: bool) -> int | None:
    """The loop's correction position when it lies inside what the committed text accepts."""
    s, extra = rnd.block_start, rnd.block_start + rnd.accepted
    if rnd.accepted < 1:
        return None
    edge, cloud = _next(t, k, cached_edge)
    if cloud is None:
        return None
    if cloud.raw.get("tree_block") is not None:        # the next tree's root
        p1 = cloud.raw["tree_block"] - 1
    elif edge is not None and edge.match >= edge.L + edge.n:
        p1 = edge.L + edge.n - 1                          # the drafter resumes from there
    else:
        return None
    if not s <= p1 < extra or cloud.match < p1 + 1:
        return None
    if cloud.raw.get("cache") is not None and cloud.L > p1:    # the cloud kept it: accepted
        return None
    return p1

