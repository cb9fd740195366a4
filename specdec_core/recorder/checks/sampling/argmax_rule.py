"""Argmax drafts under a sampling verify (issue 42): exact or not depends on the q the loop
hands to the rejection rule, which the recording does not hold. Argmax drafts with a one-hot
q (sample-and-match, vLLM's rule for drafts without probabilities: accept x with p(x), the
correction from p without x) are exact; the same drafts handed q = softmax(edge / T) accept
with min(1, p/q) >= p(x) and are biased (`greedy_draft_sampling`). The accept/reject pattern of
the judged drafts tells the two apart by their likelihood ratio; a correction where p <= q
rules out the softmax q's residual. Too little evidence either way: `not_judged`, with how many
drafts were judged and roughly how many would be needed."""
from __future__ import annotations

import math

from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import ev

LLR = math.log(1000)    # a verdict needs a likelihood ratio of 1000 (false verdict <= 1e-3)
A_MAX = 1 - 1e-3


def _p(x: float) -> float:
    return min(A_MAX, max(1e-9, x))


def bernoulli_llr(pairs) -> tuple[float, float, int]:
    """(log LR of the accept/reject pattern, alternative : null, mean KL(null || alternative)
    per draft, drafts read) from (accept probability under the alternative, under the null,
    accepted) per judged draft: the one likelihood-ratio test of the exact-rule checks
    (argmax drafts: softmax q vs one-hot q; q_check.py: raw q vs processed q)."""
    s = kl = 0.0
    n = 0
    for alt, null, acc in pairs:
        s += math.log(alt / null) if acc else math.log((1 - alt) / (1 - null))
        kl += null * math.log(null / alt) + (1 - null) * math.log((1 - null) / (1 - alt))
        n += 1
    return s, kl / max(1, n), n


def llr(J: list, corr: list) -> tuple[float, float]:
    """(log P(pattern | softmax q) - log P(pattern | one-hot q), expected |LLR| per draft under
    the one-hot q). J rows: (a under min(1, p/q), accepted, log p - log q, ..., log p)."""
    s, per, _ = bernoulli_llr((_p(j[0]), _p(math.exp(j[8])), j[1]) for j in J)
    if any(c[0] for c in corr):      # a correction where p <= q: not max(0, p - q)
        s = -math.inf
    return s, per


def resolve(out: list, data: dict, T: float, scope: str) -> list:
    """`out` with greedy_draft_sampling confirmed, replaced by the exact rule's name, or by
    not_judged (every finding of the argmax case carries evidence `argmax_drafts`)."""
    g = next((f for f in out if f["code"] == "greedy_draft_sampling"), None)
    if g is None:
        return out
    J, corr = data["judged"], data["corr"]
    s, per = llr(J, corr)
    n_dr = g["evidence"].get("n_drafts")
    ruled = ("acceptance_rule", "residual_mismatch", "sampling_rule")     # the rule named here
    rest = [f for f in out if f["code"] not in ruled + ("greedy_draft_sampling",)]
    said = ev(model="cloud", argmax_drafts=n_dr, n_judged=len(J),
              llr_softmax_vs_onehot=round(s, 2) if math.isfinite(s) else None)
    if s >= LLR:
        g["evidence"].update(said)
        g["detail"] += (f"; the accept/reject pattern of {len(J)} judged drafts favours "
                        f"min(1, p/q) with the full softmax q over a one-hot q by "
                        f"e^{s:.1f} (a one-hot q would be exact)")
        return [f for f in out if f["code"] not in ruled]
    if s <= -LLR:
        return rest + [finding(
            "sampling_rule", "acceptance rule: argmax drafts with a one-hot q (exact)",
            f"{scope}: all {n_dr} drafts are the edge's argmax; {sum(j[1] for j in J)} of "
            f"{len(J)} judged drafts accepted, as a one-hot q gives (accept with p(x)); the "
            f"full-softmax q is {'ruled out by a correction where p <= q' if s == -math.inf else f'e^{-s:.1f} times less likely'}",
            "sample-and-match with greedy drafts (vLLM), or vLLM's rule for drafts without "
            "probabilities: accept x with p(x), correct from p without x; every emitted token "
            "is drawn from p", "nothing to fix", {**said, "rule": "argmax_onehot"})]
    need = int(math.ceil(LLR / per)) if per > 0 else None
    return rest + [finding(
        "not_judged", "argmax drafts: whether q is one-hot (exact) or the full softmax (biased) "
        "is not judged", f"{scope}: all {n_dr} drafts are the edge's argmax; {len(J)} judged "
        f"drafts give a likelihood ratio of e^{s:.1f} between the two (a verdict needs "
        f"e^{LLR:.1f})" + (f"; about {need} judged drafts would be needed (pool more clips, or "
                           "a higher temperature)" if need else ""),
        "the recording holds the drafts, not the q the loop handed to its rejection rule: "
        "with a one-hot q the loop is exact, with q = softmax(edge / T) it is biased",
        "record more clips (the pooled check judges them together), or sample the drafts from q",
        {**said, "needed": need}, severity="info")]


def none_judged(data: dict, scope: str) -> list:
    """One finding when drafts were verified under sampling and none could be judged."""
    n = data.get("drafted", 0)
    if data["judged"] or not n:
        return []
    return [finding(
        "not_judged", f"sampling checks: 0 of {n} verified drafts could be judged",
        f"{scope}: no verified draft had q(x) and p(x) both known from the same context (a draft "
        "outside the edge's top-5, a tree whose nodes are not a chain, or drafts made from "
        "another context than the one verified)",
        "the acceptance and residual checks need, for each draft, the edge's row that drafted "
        "it and the cloud's row that judged it, on the same context",
        "nothing to fix in the loop; the sampling rule is simply not checked on this run",
        ev(model="cloud", n_drafted=n, n_judged=0), severity="info")]
