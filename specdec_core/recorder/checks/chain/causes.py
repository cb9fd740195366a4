"""Cause texts read from the recording's evidence (never a stock table): each helper looks at
the forward / positions / tokens a finding names and says which mechanism they show."""
from __future__ import annotations

from specdec_core.recorder.evidence.tape import Fwd, Tapes


def token(i, texts=None) -> str:
    """A token id as a detail names it: 'id 467 «的»' (its text when a tokenizer is at hand);
    'nothing' where there is no token."""
    if i is None:
        return "nothing"
    shown = texts(i).replace("\n", "↵") if texts else ""
    return f"id {i} «{shown}»" if texts else f"id {i}"


def positions(f: Fwd, got: list) -> str:
    if got and got[0] == 0:
        mask = f.raw.get("mask_shape")
        return (f"the positions restart at 0 although the cache holds {f.L}: they were computed "
                "from the new tokens alone" + (f" (this forward's attention mask is {mask}, "
                                               "built for the new tokens only)" if mask and mask[-1] <= f.n else ""))
    return (f"the positions start at {got[0] if got else '?'} while the cache holds {f.L}: they "
            "are counted along another sequence than the one in the cache")


def stale(t: Tapes, f: Fwd, d: int) -> str:
    w = f.writers[d]
    src = next((g for g in t.fwds if g.i == w), None)
    what = "a draft" if src is not None and src.model == "edge" else "an input"
    rejected = any(g.model == "cloud" and g.i >= w and g.row_at(d - 1) is not None
                   and d < len(g.ctx) and g.ctx[d] == f.ctx[d] for g in t.fwds)
    return (f"cache position {d} still holds {what} written by forward {w}"
            + (" that a cloud forward scored and the committed text replaced" if rejected else "")
            + (": it was never overwritten (the static cache's write position was not moved back to "
               "the committed length after that round)" if f.raw.get("cache_static") else
               ": it was never rolled back (the cache was not cropped to the committed length "
               "after that round)"))


def stale_fix(f: Fwd) -> str:
    if f.raw.get("cache_static"):       # preallocated slots, written at a position: never cropped
        return ("after every verification set the write position (input_pos / cache_position) "
                "back to the committed length, so the next forward overwrites the rejected drafts")
    return ("after every verification crop both caches to the committed length "
            "(cache.crop(-(cache_len - keep)))")


CROP_SHORT = "fewer than the loop's counter of what it has seen"


def mismatch(f: Fwd, d: int, C: list, texts=None) -> str:
    ctx = f.ctx
    if d >= 1 and ctx[d] == ctx[d - 1] and d - 1 < len(C) and ctx[d - 1] == C[d - 1]:
        return (f"the token at position {d - 1} is fed again at position {d}: a token fed twice "
                "(e.g. seq[seen - 1:] instead of seq[seen:])")
    m = next((m for m in range(1, 9) if d >= m and len(ctx) >= d + m
              and ctx[d:d + m] == ctx[d - m:d]), None)
    if m:
        return (f"the {m} token(s) before position {d} are repeated from it: a block added to the "
                "model input twice (e.g. drafts appended to the input and committed again)")
    m = next((m for m in range(1, 9) if d + m < len(C) and ctx[d] == C[d + m]), None)
    if m and d == f.L:       # the cache is right up to its end; the fed ids skip m committed tokens
        n = "one token" if m == 1 else f"{m} tokens"
        return (f"the cache holds {f.L} tokens and the ids fed after it continue the committed text from "
                f"position {d + m}: the cache holds {n} {CROP_SHORT} (cropped short of the counter, or the "
                "counter moved past the crop), so the committed token(s) between were never fed")
    if m == 1:
        return (f"position {d} holds the committed token of position {d + 1}: a committed token "
                "is missing from this model's input")
    return (f"the input holds {token(ctx[d], texts)} at position {d} where the committed text has "
            f"{token(C[d] if d < len(C) else None, texts)}: it was built from another sequence than the "
            "committed one")


def accepted_drafts(rounds) -> set:
    return {p for r in rounds if r.verified for p in range(r.block_start, r.block_start + r.accepted)}


def not_greedy(bad, t: Tapes, rounds) -> str:
    """Committed tokens the cloud did not choose: drafts accepted (at which ranks) or cloud
    tokens that are not its argmax."""
    drafted = accepted_drafts(rounds)
    acc = [(p, f.rank_of(r, t.C[p])) for p, f, r in bad if p in drafted]
    own = [p for p, f, r in bad if p not in drafted]
    parts = []
    if acc:
        ranks = sorted({x or 6 for _, x in acc})
        far = max(ranks) > 5
        parts.append(f"{len(acc)} accepted draft(s) the cloud ranks "
                     f"{', '.join(str(x) if x <= 5 else '>5' for x in ranks[:6])}: the acceptance "
                     "test is not greedy equality" + (
                         " (drafts beyond the cloud's top-5 pass: a probabilistic test such as a "
                         "p/q coin flip, or no test)" if far else " (a rank window / threshold)"))
    if own:
        parts.append(f"{len(own)} correction/bonus token(s) are not the cloud's argmax (sampled, "
                     "or taken from the wrong row)")
    return "; ".join(parts) or "committed tokens the cloud did not choose"


def unverified(t: Tapes, tail: int, gen: list, texts) -> str:
    start = len(t.C) - tail
    past = [f for f in t.fwds if f.model == "cloud" and len(f.ctx) > start]
    if tail and past:
        return (f"cloud forward {past[0].i} did run over these positions, but on a context that "
                "is not the committed text (see the context findings), so none of its rows "
                "verified them")
    last = texts(gen[-1]) if gen else ""
    if tail and last.strip() and any(c in last for c in "。.!?！？\n"):
        return (f"the run ended on the drafted {last!r} before the cloud verified it: a stop "
                "that fires on decoded text during drafting")
    if tail:
        return (f"the last {tail} token(s) are drafts returned without a verification (the loop "
                "ended after drafting, e.g. on the length limit or a stop inside the draft)")
    return (f"the run stopped on {last!r}, which is not a stop id, before the length limit: a "
            "stop condition other than the declared stop ids")


def edge_correction_cause(rounds, bad, texts=None) -> str | None:
    """Every wrong token a draft the round's edge put in place of an id it was fed (its own
    correction of a lower level's proposal: a cascade), committed against the round's own verify row."""
    by_cloud, made = {r.cloud.i: r for r in rounds if r.verified}, []
    for p, f, r in bad:
        rnd = by_cloud.get(f.i)
        made.append(next((g for g in rnd.edge if g.rows and g.row_at(p - 1) is not None and p < len(g.ctx)
                          and g.ctx[p] != f.ctx[p] == g.rows["argmax"][g.row_at(p - 1)]), None) if rnd else None)
    if not bad or None in made:
        return None
    (p, f, r), g = bad[0], made[0]
    return (f"all {len(bad)} wrong token(s) are the edge's own corrections, committed unjudged: at position "
            f"{p} edge forward {g.i} was fed {token(g.ctx[p], texts)} (a proposal of a level below it) and "
            f"its row gives {token(f.ctx[p], texts)}, the draft committed, although the round's own verify "
            f"(cloud forward {f.i}, row {r}) gives {token(f.rows['argmax'][r], texts)}: the cloud's verdict "
            "on the edge's corrections was computed and not applied")
