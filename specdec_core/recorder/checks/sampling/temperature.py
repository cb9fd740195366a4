"""`hidden_draft_processing` from the drafts themselves: under greedy, drafts that are not the
edge's argmax; sampled, drafts drawn at another temperature than the declared one (a maximum
likelihood estimate against the declared T; a top-k filter is `draft_filter`). Per clip the test
has little power on a peaked edge: its pooled form over several recordings of one decoder
(issue 36) needs a pooled likelihood ratio of at least LR_POOLED over the distinct runs,
confirmed by both independent halves (docs/recorder.md, "Seeds and the pooled temperature
check")."""
from __future__ import annotations

import math

import numpy as np
import torch

from specdec_core.findings import finding
from specdec_core.recorder.checks.chain.draft_origin import fed_by
from specdec_core.recorder.checks.registry import check, ev
from specdec_core.recorder.checks.sampling import draft_filter

LR_MIN = 6.0     # log-likelihood ratio: p ~ 5e-4 under the declared temperature -> error
LR_WEAK = 1.0    # p ~ 0.16: reported as a warning (a peaked edge gives one clip little power)
LR_POOLED = 2.5     # pooled log-likelihood ratio (2*LR ~ chi2(1): p ~ 0.025 per pooled test)
MIN_DRAFTS = 30     # fewer informative drafts over all runs: no pooled verdict


def estimate_temperature(samples, T: float, top: int = 5):
    """MLE of T for tokens drawn from softmax(logits / T), conditioned on the token being in the
    edge's top-5 (the recorder keeps top-5 log-probs, which are logits up to a constant):
    (estimate, drafts read, drafts outside, log-likelihood ratio of the estimate against `T`
    (2*LR ~ chi2(1))); the estimate is None under 2 drafts read."""
    rows, idx, outside = [], [], 0
    for f, r, x in samples:
        ids = f.rows["top_ids"][r][:top]
        if x in ids:
            rows.append(f.rows["top_logp"][r][:top])
            idx.append(ids.index(x))
        else:
            outside += 1
    if len(rows) < 2:
        return None, len(rows), outside, 0.0
    grid = torch.exp(torch.linspace(math.log(0.05), math.log(5.0), 400, dtype=torch.float64))
    zz = np.array(rows, dtype=np.float64)[None] / grid.numpy()[:, None, None]    # [G, N, 5]
    m = zz.max(-1)        # logsumexp in numpy: torch's threads on a small tensor cost 10x
    lse = m + np.log(np.exp(zz - m[..., None]).sum(-1))
    ll = torch.from_numpy((zz[:, np.arange(len(idx)), idx] - lse).sum(-1))
    best = int(ll.argmax())
    return float(grid[best]), len(rows), outside, float(ll.max() - ll[int((grid - T).abs().argmin())])


def temperature_finding(samples, T: float, scope: str = "this run") -> list[dict]:
    """Sampled drafts: is the declared temperature the one they were drawn at?"""
    if all(f.rows["argmax"][r] == x for f, r, x in samples):
        return []     # argmax drafts are a rule, not a temperature (recorder/checks/sampling/argmax_rule.py)
    R, logp = draft_filter.detect(samples, T)
    top = max((draft_filter.rank(f, r, x) for f, r, x in samples), default=6)
    # drafts all inside the top-R (R <= 4) may be filtered: judge T on the top-R alone
    est, n, outside, lr = estimate_temperature(samples, T, R or (top if 2 <= top <= 4 else 5))
    if est is None or n < 12:
        return []
    pre = [draft_filter.finding_for(R, logp, len(samples), scope, ev(
        samples[0][0], samples[0][0].first_q + samples[0][1] + 1, None, top_k=R,
        n_drafts=len(samples), effective_temperature=round(est, 3), declared=T))] if R else []
    ratio = est / T
    if 0.8 <= ratio <= 1.25 or lr < (LR_WEAK if ratio < 0.8 else LR_MIN):
        return pre         # weak evidence is reported only for over-sharp drafts
    f, r, x = samples[0]
    return pre + [finding(
        "hidden_draft_processing", f"drafts look sampled at temperature {est:.2f}, declared {T:g}",
        f"maximum-likelihood temperature of {n} drafted tokens ({scope}) under the edge's logits: "
        f"{est:.2f} (x{ratio:.2f} the declared one, log-likelihood ratio {lr:.1f}); {outside} "
        f"drafts outside the edge's top-{R or 5}",
        ("the drafts are sharper than q at the declared temperature: the logits are divided by "
         "a temperature twice (or by a lower one) before sampling" if ratio < 1 else
         "the drafts are flatter than q at the declared temperature: they are sampled at a "
         "higher temperature or from added noise"),
        "apply the temperature once; no extra processing of the draft logits",
        ev(f, f.first_q + r + 1, None, effective_temperature=round(est, 3), declared=T,
           n_drafts=n), severity="error" if lr >= LR_MIN else "warning")]


def _side(samples, T: float) -> int:
    """-1 sharper, +1 flatter than T, 0 when too few drafts to tell."""
    est, n, *_ = estimate_temperature(samples, T)
    if est is None or n < MIN_DRAFTS // 2:
        return 0
    return -1 if est < T else 1


def pooled_temperature(runs: list) -> list[dict]:
    """hidden_draft_processing over the distinct runs (their Evidence), when the evidence holds
    in both halves."""
    T = max((float(e.declared.get("temperature") or 0.0) for e in runs), default=0.0)
    if not T or len(runs) < 2:
        return []
    samples = [s for e in runs for s in e.samples]
    found = temperature_finding(samples, T, f"{len(runs)} distinct runs pooled")
    temp = [f for f in found if "effective_temperature" in f.get("evidence", {})
            and f["code"] == "hidden_draft_processing" and "top_k" not in f["evidence"]]
    if not temp:
        return found
    halves = [_side([s for e in runs[i::2] for s in e.samples], T) for i in (0, 1)]
    if halves[0] == halves[1] != 0:
        _, n, _, lr = estimate_temperature(samples, T)
        if n >= MIN_DRAFTS and lr >= LR_POOLED:
            return found
    return [f for f in found if f not in temp]


@check("hidden_draft_processing", "draft_filter", scope="row", order=90, pooled=pooled_temperature)
def check_draft_rule(e) -> list[dict]:
    samples, T, texts = e.samples, float(e.declared.get("temperature") or 0.0), e.texts
    if not samples:
        return []
    if T <= 0:
        # a draft penalised as the declared target penalty penalises (generate's assistant) is fine
        pen = lambda f, r: (f.rows.get("penalised_argmax") or [None] * (r + 1))[r]  # noqa: E731
        # only rows that made their draft: a row fed its draft did not (checks/chain/draft_origin.py)
        off = [(f, r, x) for f, r, x in samples if x not in (f.rows["argmax"][r], pen(f, r)) and not fed_by(f, r)]
        if not off:
            return []
        f, r, x = off[0]
        ranks = sorted({f.rank_of(r, x) or 6 for f, r, x in off})
        span = f"{ranks[0]}" if len(ranks) == 1 else f"{ranks[0]}..{'>5' if ranks[-1] > 5 else ranks[-1]}"
        return [finding(
            "hidden_draft_processing", f"{len(off)} of {len(samples)} drafts are not the edge's argmax (greedy declared)",
            f"edge forward {f.i}: drafted {texts(x)!r} (edge rank {f.rank_of(r, x) or '>5'}), the "
            f"edge's own argmax is {texts(f.rows['argmax'][r])!r}",
            f"{len(off)} drafts are edge choices of rank {span}, not its argmax: the draft "
            "logits are changed before the pick (penalties, a filter, a temperature or "
            "sampling) while greedy is declared",
            "pick the draft from the edge's logits under the declared rule; declare any gate",
            ev(f, f.first_q + r + 1, {"drafted": x, "edge_argmax": f.rows["argmax"][r]},
               n_drafts=len(samples), n_off=len(off)))]
    return temperature_finding(samples, T)
