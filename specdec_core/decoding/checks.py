"""Debug checks the round runs on itself. Each reads a Run and at most warns: they see a bug's
effect (a stale KV cache, a q other than the drafts' distribution), never which fault is on."""
from __future__ import annotations

import torch

from specdec_core import findings
from specdec_core.decoding import sampling


class CacheInvariantError(AssertionError):
    pass


def cache_agrees(run, cached: torch.Tensor) -> None:
    """Every cache_check_every rounds, on a round's first draft row: the edge's cached
    next-token logits against a cache-free recompute of the committed sequence."""
    n = run.cfg.cache_check_every
    if not n or run.round % n or run.seq.n_gen == 0:
        return
    fresh = run.edge.recompute_last(run.seq.generated())
    diff = float((fresh - cached).abs().max())
    tol = 1e-3 + 2e-2 * float(fresh.abs().max())
    if diff > tol:
        run.warn({"kind": "cache_desync", "round": run.round, "max_abs_diff": round(diff, 4),
                  "message": f"round {run.round}: edge logits from its KV cache differ from a "
                             f"cache-free recompute by {diff:.3g} logits (tolerance {tol:.2g} logits)"})


def cache_invariant(run) -> None:
    """debug=True, after every round: each cache holds exactly the committed ids it claims."""
    full = run.seq.ids
    for name, r in (("edge", run.edge), ("cloud", run.cloud)):
        if r.cache_len() != r.seen:
            raise CacheInvariantError(f"{name}: cache holds {r.cache_len()} positions, runner saw {r.seen}")
        if r.seen > len(full) - 1 and not run.ended_by:
            raise CacheInvariantError(f"{name}: saw {r.seen} > committed {len(full)} - 1")
        if r.history != full[: r.seen]:
            raise CacheInvariantError(f"{name}: cache holds tokens that are not committed")


def q_matches_draft(run, d, q) -> None:
    """Sampling: the q handed to the acceptance rule must be the distribution the drafts were
    drawn from (processed logits at the temperature). transformers #47932 hands it the raw
    logits' softmax: the rule min(1, p/q) is then not exact. Warns once per round."""
    if q is None or not d.rows or run.cfg.temperature <= 0:
        return
    drawn = sampling.probs(torch.stack(d.rows), run.cfg.temperature)
    tv = float(0.5 * (q.float() - drawn.float()).abs().sum(-1).max())
    if tv > 0.02:
        run.warn({"kind": "q_mismatch", "round": run.round, "tv": round(tv, 4),
                  "message": f"round {run.round}: the acceptance rule got a q that differs from "
                             f"the distribution the drafts were sampled from (TV {tv:.2f})"},
                 toast=not any(w.get("kind") == "q_mismatch" for w in run.trace.warnings))


def q_mismatch_findings(warnings: list) -> list:
    """The built-in decoder's own finding (the rest come from the recorder's check list, on a
    recording of the run): a sampling rule fed a q other than the drafts' distribution."""
    bad = [w for w in warnings if w.get("kind") == "q_mismatch"]
    if not bad:
        return []
    worst = max(w["tv"] for w in bad)
    return [findings.finding(
        "acceptance_rule",
        f"sampling rule fed the wrong q in {len(bad)} round(s)",
        f"the q the acceptance rule min(1, p/q) was given differs from the distribution the drafts "
        f"were sampled from by total variation up to {worst:.2f}: not lossless with sampling",
        "q taken from the raw logits while the drafts were drawn from the processed ones "
        "(temperature, warpers): transformers #47932",
        "compute q from exactly the processed logits the drafts were sampled from",
        evidence={"rounds": len(bad), "max_tv": worst, "first_round": bad[0]["round"]})]
