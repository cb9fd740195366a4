"""Debug checks the round runs on itself. Each reads a Run and at most warns: they see a bug's
effect (a distorted draft distribution, a stale KV cache), never which fault is switched on."""
from __future__ import annotations

import torch

from specdec_core.decoding import sampling


class CacheInvariantError(AssertionError):
    pass


def first_draft_row(run, raw: torch.Tensor, logits: torch.Tensor) -> None:
    """Both checks on the first drafted token of a round."""
    cache_agrees(run, raw)
    draft_undistorted(run, raw, logits)


def draft_undistorted(run, raw: torch.Tensor, logits: torch.Tensor) -> None:
    """With no gates declared, the draft must sample from the edge's own distribution at the
    configured temperature; a gap means hidden logits processing in the draft path."""
    if not run.detail or run.cfg.has_gates or logits is raw:
        return
    t = run.cfg.temperature
    tv = 0.5 * float((sampling.probs(raw, t) - sampling.probs(logits, t)).abs().sum())
    if tv > 0.05:
        first = not any(x["kind"] == "draft_distorted" for x in run.trace.warnings)
        run.warn({"kind": "draft_distorted", "round": run.round, "tv": round(tv, 4),
                  "message": f"round {run.round}: the draft distribution differs from the edge "
                             f"model's own by total variation {tv:.2f} although no gate is on"},
                 toast=first)   # one toast per run is enough


def cache_agrees(run, cached: torch.Tensor) -> None:
    """Every cache_check_every rounds: the edge's cached next-token logits against a cache-free
    recompute of the committed sequence."""
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
