"""Debug checks the round runs on itself. Each reads a Run and at most warns: they see a bug's
effect (a stale KV cache), never which fault is switched on."""
from __future__ import annotations

import torch


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
