"""Where the loop itself resumed after a verification (issue 42; docs/recorder.md, "Where the
loop resumed").

Under a sampled rule the token emitted at a rejection can equal the rejected draft: the
built-in decoder's `verify=greedy` at T > 0 samples its correction from p, and a tree loop whose
residual is not updated between siblings draws a rejected sibling again. The committed sequence
then continues the draft and reads as an acceptance, and the verify forward's later rows look
like decisions the loop never took. The loop's next forwards say where it really resumed: the
drafter's first forward after the verification ends on the loop's last committed token, and the
cloud re-feeds that token instead of keeping it (the next tree's root, for tree loops).

`build_rounds` reads it round by round (the frontier of each round already corrected, so one
pass) and keeps `t.resumed` = {verify forward: the position of the loop's own correction}; the
round's `accepted` and the tapes' `decided` read its rows past that position as unused. Only with a declared temperature T > 0: under greedy a correction is the argmax and
never equals a rejected draft. Whether the repeat was allowed is for the checks to say
(recorder/checks/tree/sampling.py: never under an exact sibling rule)."""
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

