"""Declared draft processing (issue 42): is the q handed to min(1, p/q) the processed q the
drafts were sampled from, or the raw softmax (transformers #47932)? The edge's rows keep, on a
set fixed before the draft (its raw and processed top-5), both log-probs at T (`q_rows`); the
accept/reject pattern of the judged drafts gives the likelihood ratio of the two. A verdict
needs 1000 : 1 either way; in between, `not_judged` with about how many drafts would do."""
from __future__ import annotations

import math

from specdec_core.findings import finding
from specdec_core.recorder.checks.sampling.argmax_rule import LLR, _p, bernoulli_llr


def llr(J: list) -> tuple[float, float, int]:
    """(log LR raw q : processed q, mean KL per draft under the processed q, drafts read)."""
    pairs = []
    for a, acc, d, ci, pos, x, f, r, lp in J:
        rows = f.rows.get("q_rows")
        if rows and r < len(rows) and x in rows[r][0]:
            i = rows[r][0].index(x)
            # min(1, p/q) under the raw q, under the processed q
            pairs.append(tuple(_p(math.exp(min(0.0, lp - rows[r][k][i]))) for k in (1, 2)) + (acc,))
    return bernoulli_llr(pairs)


def resolve(out: list, data: dict, T: float, scope: str, declared: dict) -> list:
    names = {k: declared[k] for k in ("draft_top_k", "draft_top_p") if declared.get(k) is not None}
    if not names or not data["judged"]:
        return out
    s, per, n = llr(data["judged"])
    what = ", ".join(f"{k}={v:g}" for k, v in names.items())
    ev = {"model": "edge", "forward": None, "position": None, "tokens": None, "n_judged": n,
          "llr_raw_vs_processed_q": round(s, 2), "declared": what}
    if s >= LLR:
        return [f for f in out if f["code"] != "acceptance_rule"] + [finding(
            "acceptance_rule", f"the q in min(1, p/q) is the raw softmax, not the declared "
            f"processed q ({what})", f"{scope}: the accept/reject pattern of {n} judged drafts "
            f"is e^{s:.1f} times likelier with q = softmax(edge / T) than with the processed q "
            "the drafts are declared to be sampled from",
            "the drafts are sampled from the processed distribution and the raw one is handed "
            "to the rejection rule (transformers #47932): acceptance runs high and the "
            "residual is taken against the wrong q", "hand the rule the same processed q the "
            "drafts were sampled from (transformers #48007)", ev)]
    if s <= -LLR or n == 0:
        return out
    need = int(math.ceil(LLR / per)) if per > 0 else None
    return out + [finding(
        "not_judged", f"declared draft processing ({what}): whether the rule's q is the "
        "processed one is not judged", f"{scope}: {n} judged drafts give a likelihood ratio "
        f"of e^{s:.1f} between the raw and the processed q (a verdict needs e^{LLR:.1f})"
        + (f"; about {need} judged drafts would be needed" if need else ""),
        "the recording holds the drafts, not the q the loop handed to its rejection rule; "
        "the raw and processed q differ too little on these drafts to tell",
        "record more clips (pooled), or a higher temperature", {**ev, "needed": need},
        severity="info")]
