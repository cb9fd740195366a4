"""Draft filters recognised from what the drafts were: top-k on q.

A loop that samples its drafts from q restricted to the edge's R best tokens never drafts a
token of rank > R. Under the unfiltered q at the declared temperature T that is unlikely when q
puts mass outside its top-R: P(all n drafts inside top-R) = prod_i q_i(top-R). When that is
below ALPHA the drafts were filtered (an exact rule stays exact if min(1, p/q) and the residual
use the same filtered q; sampling.py then judges with q renormalised over the top-R).
"""
from __future__ import annotations

import math

from specdec_core.findings import finding

ALPHA = 1e-4
MAX_K = 4            # the recorder keeps the top-5: a top-k with k <= 4 is visible


def rank(f, r, x) -> int:
    ids = f.rows["top_ids"][r]
    return ids.index(x) + 1 if x in ids else 6


def top_mass(f, r, R: int, T: float) -> float | None:
    """q_T(top-R) of the edge row: softmax(logits / T) mass on its R best tokens."""
    lse = (f.rows.get("lse_t") or [None] * (r + 1))[r]
    if lse is None:
        return None
    return min(1.0, sum(math.exp(lp / T - lse) for lp in f.rows["top_logp"][r][:R]))


def detect(samples, T: float):
    """samples: (edge fwd, row, drafted id). -> (R, log P(all inside top-R) under q_T) when
    the drafts look top-R filtered, else (None, 0.0)."""
    if not samples or T <= 0:
        return None, 0.0
    R = max(rank(f, r, x) for f, r, x in samples)
    if R > MAX_K or R < 2:     # top-1 is greedy drafting: greedy_draft_sampling's case
        return None, 0.0
    masses = [top_mass(f, r, R, T) for f, r, _ in samples]
    if None in masses:
        return None, 0.0
    logp = sum(math.log(max(m, 1e-300)) for m in masses)
    return (R, logp) if logp < math.log(ALPHA) else (None, logp)


def finding_for(R: int, logp: float, n: int, scope: str, ev: dict) -> dict:
    return finding(
        "draft_filter", f"drafts are top-{R} filtered",
        f"{scope}: all {n} drafts are among the edge's {R} best tokens; sampled from q at the "
        f"declared temperature that happens with probability {math.exp(logp):.1e}",
        "the drafts are sampled from q restricted to its top-k (a draft filter); exact as long "
        "as min(1, p/q) and the residual use the same filtered q (the sampling checks assume so)",
        "nothing to fix if intended", ev)


