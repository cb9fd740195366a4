"""Blind checks: findings computed only from what the models were fed and scored, the output,
and the user's declared knobs. Nothing here knows which bug (or fault) is switched on."""
from __future__ import annotations

import math

import numpy as np
import torch

from specdec_core.findings import finding
from specdec_core.recorder.checks.chain import causes
from specdec_core.recorder.evidence.tape import Fwd, Tapes
from specdec_core.recorder.checks.registry import check


def _ev(f: Fwd | None, position=None, tokens=None, **kw) -> dict:
    d = {"model": f.model if f else None, "forward": f.i if f else None, "position": position,
         "tokens": tokens}
    d.update(kw)
    return d


def _greedy(d: dict) -> bool:
    return d.get("verify", "greedy") == "greedy" and not d.get("temperature")


# -- the cache / context / position family --------------------------------------------------------
@check("position_error", scope="row", order=10)
def check_positions(e) -> list[dict]:
    """skip_2d: an mrope model, whose 2-D position_ids are its three rows (omni_checks)."""
    t, skip_2d = e.t, bool(e.rec.get("mrope"))
    bad_pos, bad_mask = [], []
    for f in t.fwds:
        raw, n = f.raw, f.n
        want = list(range(f.L, f.L + n))
        for key in ("position_ids", "cache_position"):
            got = raw.get(key)
            if key == "position_ids" and skip_2d and not raw.get("mrope"):
                continue
            if got is not None and n and got != want:
                bad_pos.append((f, key, got))
                break
        m = raw.get("mask_shape")
        if m and f.L > 0 and n and m[-1] < f.L + n:
            bad_mask.append((f, m))
    out = []
    if bad_pos:
        f, key, got = bad_pos[0]
        out.append(finding(
            "position_error", f"{key} do not continue the cache in {len(bad_pos)} forward(s)",
            f"{f.model} forward {f.i}: cache held {f.L} positions, {key} passed "
            f"{got[:6]}{'...' if len(got) > 6 else ''} instead of {f.L}..{f.L + f.n - 1}",
            causes.positions(f, got),
            "pass position_ids = cache.get_seq_length() + arange(n) (or a full-length mask)",
            _ev(f, f.L, got[:8], key=key, n_forwards=len(bad_pos))))
    if bad_mask:
        f, m = bad_mask[0]
        out.append(finding(
            "position_error", f"attention mask shorter than the context in {len(bad_mask)} forward(s)",
            f"{f.model} forward {f.i}: mask shape {m} for {f.L} cached + {f.n} new positions",
            f"an attention mask of {m[-1]} column(s) on a step that attends to {f.L + f.n} "
            "positions (a mask built for the new tokens only): the model cannot see its cache "
            "correctly and derives its positions from the mask",
            "pass an attention mask covering cache + new tokens, or none",
            _ev(f, f.L, None, mask_shape=m, n_forwards=len(bad_mask))))
    return out


def _classify(f: Fwd, d: int, since: int) -> str:
    """A wrong context token at position d: in the cache and written before the decision that
    made it wrong (or by that decision's own forward, the verify that rejected it) -> stale_cache; anything else -> context_mismatch."""
    if d < f.L and 0 <= f.writers[d] <= since and not _refed(f, d):
        return "stale_cache"
    return "context_mismatch"


def _refed(f: Fwd, d: int) -> bool:
    """The slot holds a committed token fed a second time (`seq[seen - 1:]`): its writer's first
    fed id, the same as the token before it. Not a draft left in the cache (issue 50)."""
    return (d >= 1 and f.ctx[d] == f.ctx[d - 1] and f.writers[d] != f.writers[d - 1]
            and (d + 1 >= len(f.writers) or f.writers[d + 1] == f.writers[d]))


@check("stale_cache", "context_mismatch", scope="row", order=50)
def check_contexts(e) -> list[dict]:
    t, rounds, texts = e.t, e.rounds, e.texts
    C, hits = t.C, {"stale_cache": [], "context_mismatch": []}
    for f in t.fwds:                  # contradicts a position the cloud had already decided
        d = f.match
        if d >= len(f.ctx) or d >= len(C) or f.ctx[d] is None:
            continue
        when = -1 if d < t.P else t.decided.get(d, (None,))[0]
        if when is not None and when < f.i:
            hits[_classify(f, d, when if when >= 0 else f.i)].append((f, d, "decided"))
    prev = -1
    for rnd in rounds:                # drafted from a context other than the one verified
        ref = rnd.cloud.ctx if rnd.verified else C
        for p, (f, r) in sorted(rnd.drafted_by.items()):
            if p >= len(ref) or (rnd.verified and p < rnd.block_start):
                continue
            own = t.ref(f.model)       # the drafter's own prompt positions are its own
            d = next((j for j, (a, b) in enumerate(zip(f.ctx[:p], ref[:p]))
                      if a != (own[j] if j < t.P else b)), None)
            if d is not None and f.ctx[d] is not None:
                hits[_classify(f, d, prev if prev >= 0 else -1)].append((f, d, "draft"))
                break
        if rnd.verified:
            prev = rnd.cloud.i
    out = []
    for code, lst in hits.items():
        if not lst:
            continue
        f, d, how = lst[0]
        toks = {"fed": f.ctx[d], "committed": C[d] if d < len(C) else None}
        firsts = {g.model: (g, e) for g, e, _ in reversed(lst)}    # each model's first hit
        models = sorted(firsts, key=lambda m: m != f.model)          # both caches named (issue 50)
        also = "".join(f"; {g.model} forward {g.i}: position {e} holds {causes.token(g.ctx[e], texts)}"
                       f" (written by forward {g.writers[e]})" for g, e in (firsts[m] for m in models[1:]))
        if code == "stale_cache":
            out.append(finding(
                code, f"{' and '.join(models)} attended to cached tokens that are not committed "
                f"({len(lst)} forward(s))",
                f"{f.model} forward {f.i}: cache position {d} holds {causes.token(toks['fed'], texts)} "
                f"(written by forward {f.writers[d]}), the committed token there is "
                f"{causes.token(toks['committed'], texts)}{also}",
                causes.stale(t, f, d), causes.stale_fix(f),
                _ev(f, d, toks, n_forwards=len(lst), models=models), severity="error"))
        else:
            what = ("the context the edge drafted from differs from the one the cloud verified"
                    if how == "draft" else "the context differs from the committed sequence")
            out.append(finding(
                code, f"{' and '.join(models)} {'were' if len(models) > 1 else 'was'} fed a context "
                f"that is not the committed sequence ({len(lst)} forward(s))",
                f"{f.model} forward {f.i}: {what} at position {d}: fed {causes.token(toks['fed'], texts)}, "
                f"committed {causes.token(toks['committed'], texts)}{also}",
                causes.mismatch(f, d, C, texts),
                "feed each model exactly seq[cache_len:] of the one committed sequence",
                _ev(f, d, toks, n_forwards=len(lst), models=models), severity="error"))
    return out


@check("audio_missing", scope="row", order=40)
def check_own_prompt(e) -> list[dict]:
    """A drafter prefilled with a prompt that differs from the cloud's (same length): lossless
    (the cloud verifies), but it drafts from another condition; where the differing tokens are
    the clip's audio condition (the demo's prosody tokens), it does not hear the clip."""
    t, texts = e.t, e.texts
    out = []
    for model, own in t.own_prompt.items():
        if not own:
            continue
        diff = [j for j in range(t.P) if own[j] != t.prompt[j]]
        shown = ", ".join(f"{texts(t.prompt[j])}→{texts(own[j])}" for j in diff[:6])
        out.append(finding(
            "audio_missing", f"the {model}'s prompt differs from the cloud's at {len(diff)} position(s)",
            f"{model} prefill: {shown}{' …' if len(diff) > 6 else ''}",
            "the drafter was given its own prompt (e.g. the audio or its condition tokens taken "
            "out): the output stays the cloud's, but drafts that depend on what was heard fail",
            "prefill both models with the same prompt (and the same audio features)",
            {"model": model, "forward": None, "position": diff[0], "tokens": None,
             "positions": diff[:20]}, severity="warning"))
    return out


def draft_samples(t: Tapes, rounds) -> list:
    """(edge fwd, row, drafted token) for drafts made from the context the cloud verified.
    Tree rounds are left out: their nodes are chosen (top-k), not drawn (recorder/checks/tree/sampling.py)."""
    C, out = t.C, []
    for rnd in rounds:
        if rnd.verified and rnd.cloud.raw.get("tree_sel") is not None:
            continue
        ref = rnd.cloud.ctx if rnd.verified else C
        for p, (f, r) in rnd.drafted_by.items():
            if p < len(ref) and p >= max(rnd.block_start, t.P) and f.ctx[:p] == ref[:p]:
                out.append((f, r, ref[p]))
    return out


@check("hidden_draft_processing", "draft_filter", scope="row", order=90)
def check_draft_rule(e) -> list[dict]:
    t, rounds, declared, texts = e.t, e.rounds, e.declared, e.texts
    samples = draft_samples(t, rounds)
    if not samples:
        return []
    T = float(declared.get("temperature") or 0.0)
    if T <= 0:
        # a draft penalised as the declared target penalty penalises (generate's assistant) is fine
        pen = lambda f, r: (f.rows.get("penalised_argmax") or [None] * (r + 1))[r]  # noqa: E731
        off = [(f, r, x) for f, r, x in samples if x not in (f.rows["argmax"][r], pen(f, r))]
        if not off:
            return []
        f, r, x = off[0]
        return [finding(
            "hidden_draft_processing", f"{len(off)} of {len(samples)} drafts are not the edge's argmax (greedy declared)",
            f"edge forward {f.i}: drafted {texts(x)!r} (edge rank {f.rank_of(r, x) or '>5'}), the "
            f"edge's own argmax is {texts(f.rows['argmax'][r])!r}",
            f"{len(off)} drafts are edge choices of rank {_span(off)}, not its argmax: the draft "
            "logits are changed before the pick (penalties, a filter, a temperature or "
            "sampling) while greedy is declared",
            "pick the draft from the edge's logits under the declared rule; declare any gate",
            _ev(f, f.first_q + r + 1, {"drafted": x, "edge_argmax": f.rows["argmax"][r]},
                n_drafts=len(samples), n_off=len(off)))]
    return temperature_finding(samples, T)


def _span(off) -> str:
    ranks = sorted({f.rank_of(r, x) or 6 for f, r, x in off})
    lo, hi = ranks[0], ranks[-1]
    return f"{lo}" if lo == hi else f"{lo}..{'>5' if hi > 5 else hi}"


def temperature_finding(samples, T: float, scope: str = "this run") -> list[dict]:
    """Sampled drafts: is the declared temperature the one they were drawn at? (Per clip the
    test has little power on a peaked edge; pool several runs with pooled_temperature.)"""
    from specdec_core.recorder.checks.sampling import draft_filter

    if all(f.rows["argmax"][r] == x for f, r, x in samples):
        return []     # argmax drafts are a rule, not a temperature (recorder/checks/sampling/argmax_rule.py)
    R, logp = draft_filter.detect(samples, T)
    top = max((draft_filter.rank(f, r, x) for f, r, x in samples), default=6)
    # drafts all inside the top-R (R <= 4) may be filtered: judge T on the top-R alone
    est, n, outside, ll, grid = estimate_temperature(samples, R or (top if 2 <= top <= 4 else 5))
    if est is None or n < 12:
        return []
    pre = [draft_filter.finding_for(R, logp, len(samples), scope, _ev(
        samples[0][0], samples[0][0].first_q + samples[0][1] + 1, None, top_k=R,
        n_drafts=len(samples), effective_temperature=round(est, 3), declared=T))] if R else []
    ratio = est / T
    # likelihood ratio of the best temperature against the declared one (2*LR ~ chi2(1))
    lr = float(ll.max() - ll[int((grid - T).abs().argmin())])
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
        _ev(f, f.first_q + r + 1, None, effective_temperature=round(est, 3), declared=T,
            n_drafts=n), severity="error" if lr >= LR_MIN else "warning")]


LR_MIN = 6.0     # log-likelihood ratio: p ~ 5e-4 under the declared temperature -> error
LR_WEAK = 1.0    # p ~ 0.16: reported as a warning (a peaked edge gives one clip little power)


def estimate_temperature(samples, top: int = 5):
    """MLE of T for tokens drawn from softmax(logits / T), conditioned on the token being in the
    edge's top-5 (the recorder keeps top-5 log-probs, which are logits up to a constant)."""
    rows, idx, outside = [], [], 0
    for f, r, x in samples:
        ids = f.rows["top_ids"][r][:top]
        if x in ids:
            rows.append(f.rows["top_logp"][r][:top])
            idx.append(ids.index(x))
        else:
            outside += 1
    if len(rows) < 2:
        return None, len(rows), outside, None, None
    grid = torch.exp(torch.linspace(math.log(0.05), math.log(5.0), 400, dtype=torch.float64))
    zz = np.array(rows, dtype=np.float64)[None] / grid.numpy()[:, None, None]    # [G, N, 5]
    m = zz.max(-1)        # logsumexp in numpy: torch's threads on a small tensor cost 10x
    lse = m + np.log(np.exp(zz - m[..., None]).sum(-1))
    ll = torch.from_numpy((zz[:, np.arange(len(idx)), idx] - lse).sum(-1))
    best = int(ll.argmax())
    return float(grid[best]), len(rows), outside, ll, grid
