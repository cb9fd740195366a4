"""The sampled-draft temperature check over several recordings of one decoder (issue 36): a
pooled likelihood ratio of at least LR_POOLED over the distinct runs, confirmed by both
independent halves (docs/recorder.md, "Seeds and the pooled temperature check")."""
from __future__ import annotations

from specdec_core.recorder.checks.chain.context import estimate_temperature, temperature_finding
from specdec_core.recorder.checks.registry import pooled_check

LR_POOLED = 2.5     # pooled log-likelihood ratio (2*LR ~ chi2(1): p ~ 0.025 per pooled test)
MIN_DRAFTS = 30     # fewer informative drafts over all runs: no pooled verdict


def _samples(evidences: list) -> list:
    return [s for e in evidences for s in e.samples]


def _side(samples, T: float) -> int:
    """-1 sharper, +1 flatter than T, 0 when too few drafts to tell."""
    est, n, *_ = estimate_temperature(samples)
    if est is None or n < MIN_DRAFTS // 2:
        return 0
    return -1 if est < T else 1


def _pooled_lr(samples, T: float) -> float:
    est, n, _, ll, grid = estimate_temperature(samples)
    if est is None or n < MIN_DRAFTS:
        return 0.0
    return float(ll.max() - ll[int((grid - T).abs().argmin())])


@pooled_check("hidden_draft_processing", "draft_filter", order=125)
def pooled_temperature(runs: list) -> list[dict]:
    """hidden_draft_processing over the distinct runs (their Evidence), when the evidence holds
    in both halves."""
    T = max((float(e.declared.get("temperature") or 0.0) for e in runs), default=0.0)
    if not T or len(runs) < 2:
        return []
    samples = _samples(runs)
    found = temperature_finding(samples, T, f"{len(runs)} distinct runs pooled")
    temp = [f for f in found if "effective_temperature" in f.get("evidence", {})
            and f["code"] == "hidden_draft_processing" and "top_k" not in f["evidence"]]
    if not temp:
        return found
    halves = [_side(_samples(runs[i::2]), T) for i in (0, 1)]
    agree = halves[0] == halves[1] != 0
    if agree and _pooled_lr(samples, T) >= LR_POOLED:
        return found
    return [f for f in found if f not in temp]
