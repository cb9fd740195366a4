"""`run --baseline` and the page's cloud-only run (`compare`): the built-in decoder's trace against
the cloud-only reference, the numerics probe and the verdict. `record --reference`: the cloud's
own greedy decode on the same prompt, where the user's output first leaves it, and why
(analysis/divergence.py); the user's side is the recorded cloud forward whose row decided the
divergent position (its top-5 log-probs: log-prob differences are logit differences)."""
from __future__ import annotations

from specdec_core.decoding.reference import diverge, first_divergence, reference_for
from specdec_core.recorder import report


def compare(backend, prompt, cfg, target, probe: bool = True, reference=None) -> dict:
    """The `baseline` entry: {text, token_ids, wall_s, first_divergence}. `target`: the run's
    trace dict, or its result. Also sets trace["numerics"] (the probe) and trace["reference"] (the
    token view's marker); a numerics divergence joins the findings (report.compared).
    `reference`: reference_for()'s result, to reuse (A/B: one cloud-only decode for both sides)."""
    trace = getattr(target, "trace", target)
    base, logits = reference or reference_for(backend, prompt, cfg)
    base = dict(base)
    if probe and "numerics" not in trace:
        from specdec_core.decoding.numerics import probe as run_probe

        trace["numerics"] = run_probe(backend, prompt, trace.get("token_ids") or [], k=cfg.k)
    fd = first_divergence(trace, base["token_ids"], logits, backend.tokenizer, trace.get("numerics"))
    base["first_divergence"] = fd
    trace["reference"] = {"matches": fd is None, "first_divergence": fd}
    return report.compared(target, base)


def reference_diff(backend, prompt, res, knobs: dict) -> dict:
    """The `reference` entry of a recorded clip's result `res` (a ClipResult: its output, trace,
    recording, findings and Evidence)."""
    from specdec_core.decoding.baseline import cloud_only
    from specdec_core.decoding.config import DecodeConfig

    cfg = DecodeConfig(max_new_tokens=knobs["max_new_tokens"], stop_at_first_sentence=False,
                       min_new_tokens=0, prompt_type=knobs["prompt_type"])
    base, logits = cloud_only(backend, prompt, cfg, keep_logits=True,       # as generate would
                              repetition_penalty=knobs.get("target_repetition_penalty"))
    tokens, numerics = res.trace.tokens, res.recording.get("numerics")
    P = len(res.recording.get("prompt_ids") or [])
    side = lambda i, u, r: (tokens[i].round if i < len(tokens) else None,  # noqa: E731
                            user_row(res.evidence.t, P + i, u, r))
    fd = diverge(res.ids, base["token_ids"], logits, backend.tokenizer, prompt.length, side,
                 numerics, res.findings, (numerics or {}).get("dtype"))
    return {"token_ids": base["token_ids"], "text": base["text"], "matches": fd is None,
            "first_divergence": fd}


def user_row(t, p: int, u: int | None, r: int | None) -> dict:
    """What the cloud forward that decided position p said there (the canonical recording's
    tapes `t`: a tree forward read as its accepted path)."""
    if u is None:
        return {}
    if p not in t.decided:
        return {"unverified": True}
    fi, row = t.decided[p]
    f = next(x for x in t.fwds if x.i == fi)
    lp = f.rows["top_logp"][row]
    ids = f.rows["top_ids"][row]
    margin = round(lp[0] - lp[1], 5) if len(lp) > 1 else None
    mine_lp, ref_lp = f.logp_of(row, u), (f.logp_of(row, r) if r is not None else None)
    argmax = mine_lp is not None and mine_lp >= lp[0]
    gap = round(mine_lp - ref_lp, 5) if (mine_lp is not None and ref_lp is not None) else None
    if gap is None and argmax and len(lp) > 1:
        gap = round(mine_lp - lp[-1], 5) if r not in ids else None   # at least the 5th's gap
    return {"margin": margin, "gap": gap, "width": f.n, "argmax": argmax,
            "same_context": f.match >= p, "forward": fi}
