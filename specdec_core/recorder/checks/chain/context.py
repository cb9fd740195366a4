"""Blind checks: findings computed only from what the models were fed and scored, the output,
and the user's declared knobs. Nothing here knows which bug (or fault) is switched on."""
from __future__ import annotations

from specdec_core.findings import finding
from specdec_core.recorder.checks.chain import causes
from specdec_core.recorder.evidence.tape import Fwd
from specdec_core.recorder.checks.registry import check, ev


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
            ev(f, f.L, got[:8], key=key, n_forwards=len(bad_pos))))
    if bad_mask:
        f, m = bad_mask[0]
        out.append(finding(
            "position_error", f"attention mask shorter than the context in {len(bad_mask)} forward(s)",
            f"{f.model} forward {f.i}: mask shape {m} for {f.L} cached + {f.n} new positions",
            f"an attention mask of {m[-1]} column(s) on a step that attends to {f.L + f.n} "
            "positions (a mask built for the new tokens only): the model cannot see its cache "
            "correctly and derives its positions from the mask",
            "pass an attention mask covering cache + new tokens, or none",
            ev(f, f.L, None, mask_shape=m, n_forwards=len(bad_mask))))
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
        fed, committed = causes.token(toks["fed"], texts), causes.token(toks["committed"], texts)
        if code == "stale_cache":
            title = f"{' and '.join(models)} attended to cached tokens that are not committed"
            detail = (f"cache position {d} holds {fed} (written by forward {f.writers[d]}), the "
                      f"committed token there is {committed}")
            cause, fix = causes.stale(t, f, d), causes.stale_fix(f)
        else:
            what = ("the context the edge drafted from differs from the one the cloud verified"
                    if how == "draft" else "the context differs from the committed sequence")
            title = (f"{' and '.join(models)} {'were' if len(models) > 1 else 'was'} fed a context "
                     "that is not the committed sequence")
            detail = f"{what} at position {d}: fed {fed}, committed {committed}"
            cause = causes.mismatch(f, d, C, texts)
            fix = ("crop the cache to the committed length the loop's counter holds (or feed seq[cache_len:])"
                   if causes.CROP_SHORT in cause else "feed each model exactly seq[cache_len:] of the one committed sequence")
        out.append(finding(code, f"{title} ({len(lst)} forward(s))", f"{f.model} forward {f.i}: {detail}{also}",
                           cause, fix, ev(f, d, toks, n_forwards=len(lst), models=models)))
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
            ev(None, diff[0], model=model, positions=diff[:20]), severity="warning"))
    return out
