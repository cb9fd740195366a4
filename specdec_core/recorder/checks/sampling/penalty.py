"""A declared target repetition penalty under sampling (issue 42): does the output follow the
penalised p or the raw one? In an exact loop every committed token is a sample of the declared
p given the sequence before it, so the likelihood ratio raw : penalised of the committed tokens
is a martingale under the penalised p: it passes 1000 with probability <= 1e-3 (Ville). Each
token is read on the set S of its row's raw and penalised top-5 (fixed before the outcome) plus
"anything else" (recorder/processing.penalty_rows). Greedy runs: named_causes.py."""
from __future__ import annotations

import math

from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check, ev, pooled_sum
from specdec_core.recorder.checks.sampling.argmax_rule import LLR

FLOOR = 1e-4        # "anything else" mass below the stored rounding: not evidence


def _other(lps) -> float:
    return math.log(max(FLOOR, 1.0 - sum(math.exp(x) for x in lps)))


def collect(e) -> dict:
    """The log LR raw : penalised of the committed tokens read (`s`), how many (`n`), the first
    one's position, and the declared knobs."""
    t, out = e.t, {"s": 0.0, "n": 0, "first": [], "declared": e.declared}
    if not e.declared.get("target_repetition_penalty"):
        return out
    for p, f, r in t.decisions():
        rows = f.rows.get("penalty_rows")
        if not rows or r >= len(rows) or f.ctx[:p] != t.C[:p]:
            continue
        ids, a, b = rows[r]
        c = t.C[p]
        la, lb = (a[ids.index(c)], b[ids.index(c)]) if c in ids else (_other(a), _other(b))
        out["s"] += la - lb
        out["n"] += 1
        out["first"] = out["first"] or [p]
    return out


def judge(data: dict, scope: str) -> list:
    s, n, declared = data["s"], data["n"], data["declared"]
    R = declared.get("target_repetition_penalty")
    if not R or not declared.get("temperature") or n == 0 or s < LLR:
        return []
    return [finding(
        "lossless_violation", "output follows the unpenalised distribution: the declared "
        "repetition penalty is not applied",
        f"{scope}: {n} committed tokens are e^{s:.1f} times more likely under the cloud's raw "
        f"p than under p with target_repetition_penalty={R:g} (a verdict needs e^{LLR:.1f})",
        f"the declared target_repetition_penalty={R:g} does not reach the output: the loop "
        "ignores it, or applies it to the drafts only",
        "apply the penalty to the cloud's logits of every verified slot (given the sequence and "
        "the drafts before it) before the acceptance test, the residual and the bonus",
        ev(model="cloud", position=data["first"][0], named="penalty_not_applied",
           llr_raw_vs_penalised=round(s, 2), n_tokens=n))]


@check("lossless_violation", order=140, pooled=pooled_sum(collect, judge))
def penalty(e) -> list:
    """A declared penalty under sampling."""
    return judge(collect(e), "this run")
