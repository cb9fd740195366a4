"""The sampled-draft temperature check over several recordings of one decoder (issue 36): a
pooled likelihood ratio of at least LR_POOLED over the distinct runs, confirmed by both
independent halves (docs/recorder.md, "Seeds and the pooled temperature check")."""
from __future__ import annotations

LR_POOLED = 2.5     # pooled log-likelihood ratio (2*LR ~ chi2(1): p ~ 0.025 per pooled test)
MIN_DRAFTS = 30     # fewer informative drafts over all runs: no pooled verdict


def run_key(rec: dict) -> tuple:
    """What makes two runs the same evidence: every id each model was fed, in order (the same
    seed on the same prompt replays them all; a greedy-verified loop's output alone is not
    enough, its drafts differ by seed)."""
    fed = tuple((f.get("model"), tuple(f.get("ids") or ())) for f in rec.get("forwards") or ())
    return tuple(rec.get("prompt_ids") or ()), tuple(rec.get("out_ids") or ()), fed


def distinct(recordings: list[dict]) -> list[dict]:
    """One recording per distinct run (the same seed replayed on the same prompt counts once)."""
    seen, out = set(), []
    for rec in recordings:
        key = run_key(rec)
        if key not in seen:
            seen.add(key)
            out.append(rec)
    return out


def _samples(recordings: list[dict]) -> list:
    from specdec_core.recorder.checks import draft_samples
    from specdec_core.recorder.rounds import build_rounds
    from specdec_core.recorder.tape import build_tapes

    samples = []
    for rec in recordings:
        t = build_tapes(rec)
        samples += draft_samples(t, build_rounds(t))
    return samples


def _side(samples, T: float) -> int:
    """-1 sharper, +1 flatter than T, 0 when too few drafts to tell."""
    from specdec_core.recorder.checks import estimate_temperature

    est, n, *_ = estimate_temperature(samples)
    if est is None or n < MIN_DRAFTS // 2:
        return 0
    return -1 if est < T else 1


def _pooled_lr(samples, T: float) -> float:
    from specdec_core.recorder.checks import estimate_temperature

    est, n, _, ll, grid = estimate_temperature(samples)
    if est is None or n < MIN_DRAFTS:
        return 0.0
    return float(ll.max() - ll[int((grid - T).abs().argmin())])


def pooled_temperature(recordings: list[dict]) -> list[dict]:
    """hidden_draft_processing over the distinct runs, when the evidence holds in both halves."""
    from specdec_core.recorder.checks import temperature_finding

    runs = distinct(recordings)
    T = max((float(r.get("declared", {}).get("temperature") or 0.0) for r in runs), default=0.0)
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
