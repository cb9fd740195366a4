"""Blind checks of the rejection-sampling rule (declared temperature T > 0, verify=sampling):
`acceptance_rule`, `greedy_draft_sampling`, `residual_mismatch`, from q(x) and p(x) at T of every
judged draft (docs/recorder.md, "Sampling loops": the tests, their false-alarm rates and why an
excess acceptance is reported inside residual_mismatch)."""
from __future__ import annotations

import math

import numpy as np

from specdec_core.recorder.checks.sampling import argmax_rule
from specdec_core.recorder.checks.sampling import draft_filter
from specdec_core.recorder.checks.sampling import q_check
from specdec_core.findings import fact, finding
from specdec_core.recorder.checks.registry import check, ev, pooled_sum

ALPHA = 1e-3           # family-wise false-alarm rate of the stochastic tests
N_TESTS = 3            # acceptance (all), acceptance (p < q), argmax share
MARGIN = 0.01          # log-prob margin for "certainly p < q" (stored values are rounded)
A_MAX = 1 - 1e-3       # acceptance probabilities are only known to ~1e-5: never treat as certain
MIN_ZERO_RESIDUAL = 2


def applies(declared: dict) -> float:
    """The declared temperature when the rejection rule is declared, else 0."""
    T = float(declared.get("temperature") or 0.0)
    return T if T > 0 and declared.get("verify", "greedy") == "sampling" else 0.0


def _at_t(f, r, lp, T):
    lse = (f.rows.get("lse_t") or [None] * (r + 1))[r] if f.rows else None
    return None if lp is None or lse is None else lp / T - lse


def collect(e) -> dict:
    """Per recording (its Evidence): judged drafts, draft argmax shares, corrections (see
    module doc)."""
    T = applies(e.declared)
    out = {"judged": [], "drafts": [], "corr": [], "samples": [], "drafted": 0}
    if not T:
        return out
    t, rounds = e.t, e.rounds
    # tree rounds are tree_sampling.py's to judge and to count as not judged
    out["drafted"] = sum(len(rnd.block) for rnd in rounds if rnd.verified and not rnd.is_tree)
    out["declared"] = e.declared
    out["pos0"], out["later_rejected"] = [], 0   # judged[i] at block position 0 (named_causes)
    out["samples"] = e.samples
    out["off_context"] = _off_context(e)
    for f, r, x in out["samples"]:
        qa = _at_t(f, r, f.rows["top_logp"][r][0], T)
        if qa is not None:
            out["drafts"].append((math.exp(qa), x == f.rows["argmax"][r], f.i, f.first_q + r + 1, f, r))
    for rnd in rounds:
        if not rnd.verified or rnd.is_tree:   # trees: tree_sampling.py
            continue
        cf, n = rnd.cloud, len(rnd.block)
        rejected = rnd.accepted < n and rnd.extra is not None
        for j in range(min(n, rnd.accepted + (1 if rejected else 0))):
            pos = rnd.block_start + j
            if pos not in rnd.drafted_by or pos < t.P:
                break
            f, r = rnd.drafted_by[pos]
            rc = cf.row_at(pos - 1)
            if rc is None or f.ctx[:pos] != cf.ctx[:pos]:
                break
            x, top = rnd.block[j], f.rows["top_ids"][r]
            lq = _at_t(f, r, f.rows["top_logp"][r][top.index(x)] if x in top else None, T)
            lp = _at_t(cf, rc, cf.logp_of(rc, x), T)
            if lq is None or lp is None:
                continue            # outside the edge's top-5: q(x) unknown
            a = min(A_MAX, math.exp(min(0.0, lp - lq)))
            out["judged"].append((a, j < rnd.accepted, lp - lq, cf.i, pos, x, f, r, lp))
            out["pos0"].append(j == 0)
            out["later_rejected"] += int(j > 0 and j >= rnd.accepted)
        if not rejected or rnd.extra not in rnd.drafted_by:
            continue
        pos, c = rnd.extra, t.C[rnd.extra]
        f, r = rnd.drafted_by[pos]
        rc = cf.row_at(pos - 1)
        if rc is None or f.ctx[:pos] != cf.ctx[:pos]:
            continue
        lq = _at_t(f, r, f.logp_of(r, c), T)
        lp_known = cf.logp_of(rc, c)
        lp = _at_t(cf, rc, lp_known if lp_known is not None else cf.rows["top_logp"][rc][-1], T)
        zero = lq is not None and lp is not None and lp < lq - MARGIN
        out["corr"].append((zero, cf.i, pos, c, lp, lq, f, r))
    return out


def _off_context(e) -> list:
    """A verifier that generates judges draft i on the cloud's row after ITS OWN tokens: a
    token committed in that round after one that differs from the cloud's own token was judged
    on a row of another context -> [(forward, position, token)] (before the next round)."""
    own, C, out = (e.notes.get("generated") or {}).get("own") or {}, e.t.C, []
    starts = sorted(rnd.block_start for rnd in e.rounds)
    for rnd in e.rounds:
        K, toks = own.get(rnd.cloud.i if rnd.verified else None, (None, None))
        if K is None:
            continue
        end = min([s for s in starts if s > K] + [K + len(toks) + 1, len(C)])
        i = next((i for i, x in enumerate(toks) if K + i < end and C[K + i] != x), None)
        out += [] if i is None else [(rnd.cloud.i, p, C[p]) for p in range(K + i + 1, end) if p >= e.t.P]
    return out


def _poibin(a) -> np.ndarray:
    """Distribution of the number of successes of independent Bernoulli(a_i)."""
    d = np.zeros(len(a) + 1)
    d[0] = 1.0
    for i, x in enumerate(a, 1):
        d[1:i + 1] = d[1:i + 1] * (1 - x) + d[:i] * x
        d[0] *= 1 - x
    return d


def _test(a, s: int) -> tuple[float, float, float, float]:
    """(expected, P(S <= s), P(S >= s), the two-sided exact p) under Poisson-binomial(a)."""
    d = _poibin(a)
    lo, hi = float(d[:s + 1].sum()), float(d[s:].sum())
    return float(sum(a)), lo, hi, min(1.0, 2 * min(lo, hi))


def _filtered(data: dict, T: float) -> dict:
    """With top-R filtered drafts, q is renormalised over the edge's R best tokens."""
    R, _ = draft_filter.detect(data["samples"], T)
    if not R:
        return data
    lm = lambda f, r: math.log(max(draft_filter.top_mass(f, r, R, T) or 1.0, 1e-300))  # noqa: E731
    J = []
    for a, acc, d, ci, pos, x, f, r, lp in data["judged"]:
        d2 = d + lm(f, r)
        J.append((min(A_MAX, math.exp(min(0.0, d2))), acc, d2, ci, pos, x, f, r, lp))
    inside = lambda f, r, c: c in f.rows["top_ids"][r][:R]   # noqa: E731 - else q(c) = 0
    corr = [((lq is not None and lp is not None and inside(f, r, c)
              and lp < lq - lm(f, r) - MARGIN), ci, pos, c, lp,
             None if lq is None else lq - lm(f, r), f, r)
            for zero, ci, pos, c, lp, lq, f, r in data["corr"]]
    D = [(min(1.0, a / math.exp(lm(f, r))), am, fi, pos, f, r) for a, am, fi, pos, f, r in data["drafts"]]
    return {**data, "judged": J, "corr": corr, "drafts": D}


def _match_rule(J, level) -> dict | None:
    """Sample-and-match (accept x iff the cloud's own sample there is x: P = p(x)): the accept
    counts where p < q and where p >= q both agree with it."""
    if len(J) < 12:
        return None
    ps = [_test([min(A_MAX, math.exp(j[8])) for j in sub], sum(j[1] for j in sub))[3]
          for sub in ([j for j in J if j[2] < 0], [j for j in J if j[2] >= 0], J) if sub]
    return {"p": min(ps), "n": len(J), "accepted": sum(j[1] for j in J)} if min(ps) >= level else None


def judge(data: dict, scope: str) -> list[dict]:
    """The rule judged on `collect`'s data (one run's, or several runs' summed)."""
    T = applies(data.get("declared") or {})
    if not T:
        return []
    level = ALPHA / N_TESTS
    data = _filtered(data, T)
    # residual first: its presence explains excess apparent acceptance
    corr = data["corr"]
    zero = [c for c in corr if c[0]]
    residual_bad = len(zero) >= MIN_ZERO_RESIDUAL
    out, acc_note = _acceptance(data["judged"], T, scope, level, residual_bad)
    out += _greedy_drafts(data["drafts"], T, scope, level)
    out += _residual(corr, zero, scope, acc_note) if residual_bad else []
    off = ("acceptance_rule", "residual_mismatch")
    m = any(f["code"] in off for f in out) and _match_rule(data["judged"], level)
    if m:      # the emitted tokens are the cloud's own samples: exact, another rule
        out = [f for f in out if f["code"] not in off]
        out.append(finding(
            "sampling_rule", "acceptance rule: sample-and-match (exact)",
            f"{scope}: {m['accepted']} of {m['n']} judged drafts accepted, as often as the "
            f"cloud's own sample equals the draft (probability p(x); exact p = {m['p']:.1e}); "
            "min(1, p/q) does not fit",
            "a draft is accepted iff it equals the cloud's sample at that slot and the cloud's "
            "sample is emitted at the first mismatch: every emitted token is drawn from p",
            "nothing to fix (min(1, p/q) with the residual accepts more drafts)",
            ev(model="cloud", rule="sample_and_match", p_value=m["p"])))
    out = q_check.resolve(out, data, T, scope, data.get("declared") or {})
    out = first_draft_sampled(out, data, level, scope)
    out = argmax_rule.resolve(out, data, T, scope) + argmax_rule.none_judged(data, scope)
    return out + _judged_off_context(data.get("off_context") or [], scope, T, out)


def _judged_off_context(oc: list, scope: str, T: float, out: list) -> list:
    if not oc or any(f["code"] == "acceptance_rule" for f in out):
        return []
    return [finding(
        "acceptance_rule", f"{len(oc)} tokens committed on a row of another context at T={T:g}",
        f"{scope}: the cloud generated its own tokens; after a committed token that differs from "
        f"the cloud's own, {len(oc)} more were committed in the same round (forward {oc[0][0]}, "
        f"position {oc[0][1]}), judged on the cloud's rows after its own tokens, not after theirs",
        "the loop keeps judging drafts (top-N with min(1, p/q), or equality with the cloud's "
        "token) after accepting one the cloud did not generate: p is then of another context and "
        "the output is not distributed as the cloud's samples",
        "after accepting a draft that differs from the cloud's own token, end the round there (or "
        "score the block in one forward); accept draft x iff u < p(x)/q(x)",
        ev(None, oc[0][1], [oc[0][2]], model="cloud", forward=oc[0][0], n_off_context=len(oc)))]


def _acceptance(J: list, T: float, scope: str, level: float, residual_bad: bool):
    """([acceptance_rule] or [], a note for the residual finding when that explains it)."""
    if not J:
        return [], ""
    s = sum(j[1] for j in J)
    e, _, _, p_all = _test([j[0] for j in J], s)
    lt = [j for j in J if j[2] < -MARGIN]
    s_lt = sum(j[1] for j in lt)
    e_lt, _, _, p_lt = _test([j[0] for j in lt], s_lt) if lt else (0.0, 1.0, 1.0, 1.0)
    sure_rej = [j for j in J if not j[1] and j[2] > MARGIN]
    if p_all >= level and p_lt >= level:
        return [], ""
    excess = s > e and (not lt or s_lt >= e_lt)
    detail = (f"{s} of {len(J)} judged drafts accepted ({scope}), min(1, p/q) gives "
              f"{e:.1f} (two-sided exact p = {p_all:.1e}); where p < q: {s_lt} of "
              f"{len(lt)} accepted, expected {e_lt:.1f} (p = {p_lt:.1e}); "
              f"{len(sure_rej)} rejected although p >= q")
    if residual_bad and excess:
        return [], "; apparent acceptance is too high as well: " + detail
    ex = (sure_rej or [j for j in lt if not j[1]] or J)[0]
    return [finding(
        "acceptance_rule", f"accepted drafts do not follow min(1, p/q) at T={T:g}: {s} accepted, "
        f"{e:.1f} expected", detail,
        "the acceptance test is not a draw against min(1, p(x)/q(x)) with p and q "
        "the cloud's and edge's softmax(logits / T): e.g. accept only when p > q "
        "(deterministic), accept when p exceeds a uniform draw, or p and q taken "
        "at different temperatures",
        "accept draft x iff u < p(x)/q(x) with u ~ U(0,1), p = softmax(cloud/T), "
        "q = softmax(edge/T) (Leviathan et al. 2023; Chen et al. 2023)",
        ev(None, ex[4], [ex[5]], model="cloud", forward=ex[3], n_judged=len(J),
           accepted=s, expected=round(e, 2), p_value=p_all, n_p_lt_q=len(lt),
           accepted_p_lt_q=s_lt, expected_p_lt_q=round(e_lt, 2),
           p_value_p_lt_q=p_lt, rejected_p_ge_q=len(sure_rej)))], ""


def _greedy_drafts(D: list, T: float, scope: str, level: float) -> list:
    s = sum(d[1] for d in D)
    e, _, hi, _ = _test([d[0] for d in D], s)
    if not D or hi >= level or s < len(D):   # every draft the argmax: greedy, not just over-sharp
        return []
    d0 = next(d for d in D if d[1])
    return [finding(
        "greedy_draft_sampling", f"{s} of {len(D)} drafts are the edge's argmax; sampling at T={T:g} gives "
        f"{e:.1f}",
        f"{scope}: drafts equal to the edge's argmax {s} times, expected {e:.1f} under "
        f"q = softmax(edge/T) (one-sided exact p = {hi:.1e})",
        "the drafts are picked greedily (argmax) while verification uses the rejection "
        "rule with q = softmax(edge/T): min(1, p/q) divides by a distribution the draft "
        "was not drawn from, so the output is not distributed as the cloud's samples",
        "sample each draft from q = softmax(edge_logits / T) (the same q used in "
        "min(1, p/q)), or verify greedily with temperature 0",
        ev(None, d0[3], None, model="edge", forward=d0[2], n_drafts=len(D),
           argmax_drafts=s, expected=round(e, 2), p_value=hi))]


def _residual(corr: list, zero: list, scope: str, acc_note: str) -> list:
    c0 = zero[0]
    return [finding(
        "residual_mismatch", f"{len(zero)} of {len(corr)} corrections landed where p <= q (zero residual mass)",
        f"{scope}: a correction after a rejection must come from norm(max(0, p - q)), which "
        f"has no mass where p <= q; {len(zero)} corrections were such tokens (certain from "
        f"the kept top-5 log-probs, margin {MARGIN}){acc_note}",
        "after a rejection the correction is sampled from p (the cloud's distribution) "
        "instead of the residual max(0, p - q); a correction that repeats the rejected draft "
        "then looks like an acceptance",
        "on rejection sample from max(0, p - q) / sum(max(0, p - q)); sample from p only "
        "for the bonus token after a fully accepted block",
        ev(None, c0[2], [c0[3]], model="cloud", forward=c0[1], n_corrections=len(corr),
           zero_residual=len(zero), log_p=round(c0[4], 4), log_q=round(c0[5], 4)))]


# pooled: the sampling checks over several recordings of one decoder (one Evidence per distinct run)
pooled = pooled_sum(collect, judge, "{n} runs pooled")


@check("acceptance_rule", "greedy_draft_sampling", "residual_mismatch", "sampling_rule",
       "not_judged", "draft_filter", order=130, pooled=pooled, pooled_order=155)
def sampling(e) -> list[dict]:
    return judge(collect(e), "this run")


def first_draft_sampled(out: list, data: dict, level: float, scope: str) -> list:
    """Under sampling: no judged draft at block position 0 was ever rejected, which has
    probability prod(min(1, p/q)) under the rule, while drafts further in are rejected."""
    pos0 = data.get("pos0") or []
    J0 = [j for j, z in zip(data["judged"], pos0) if z] if len(pos0) == len(data["judged"]) else []
    later_rejected = data.get("later_rejected", 0)
    if not J0 or not all(j[1] for j in J0) or not later_rejected:
        return out
    logp = sum(math.log(j[0]) for j in J0)
    if logp >= math.log(level):
        return out
    return [f for f in out if f["code"] != "acceptance_rule"] + [finding(
        "acceptance_rule", "the first draft of each block is never rejected: committed unverified",
        f"{scope}: all {len(J0)} judged drafts at block position 0 were accepted (probability "
        f"{math.exp(logp):.1e} under min(1, p/q)), while {later_rejected} drafts further in "
        "were rejected; the verify row that judges draft 0 was computed and ignored",
        "the acceptance loop starts at the second draft (ohdearquant/lattice #243): draft 0 is "
        "committed whatever the cloud's row at the position before it says",
        dict((k, fx) for k, _, fx in fact("lossless_violation", "named"))["first_draft_unverified"],
        {"model": "cloud", "forward": J0[0][3], "position": J0[0][4], "tokens": [J0[0][5]],
         "named": "first_draft_unverified", "n_block_starts": len(J0), "p_value": math.exp(logp)})]
