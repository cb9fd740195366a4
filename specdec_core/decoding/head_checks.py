"""The head drafter's sampling check (issue 35): the q handed to the acceptance rule against
the distribution the drafts were sampled from (transformers #47932, the `raw_q` fault). The
head's features are judged by the Recorder (recorder/checks/heads/stale_features.py: `stale_features`).
"""
from __future__ import annotations

import torch

from specdec_core import findings


def q_matches_draft(run, d, q) -> None:
    """Sampling: the q handed to the acceptance rule must be the distribution the drafts were
    drawn from (processed logits at the temperature). transformers #47932 hands it the raw
    logits' softmax: the rule min(1, p/q) is then not exact. Warns once per round."""
    if q is None or not d.rows or run.cfg.temperature <= 0:
        return
    from specdec_core.decoding import sampling
    drawn = sampling.probs(torch.stack(d.rows), run.cfg.temperature)
    tv = float(0.5 * (q.float() - drawn.float()).abs().sum(-1).max())
    if tv > 0.02:
        run.warn({"kind": "q_mismatch", "round": run.round, "tv": round(tv, 4),
                  "message": f"round {run.round}: the acceptance rule got a q that differs from "
                             f"the distribution the drafts were sampled from (TV {tv:.2f})"},
                 toast=not any(w.get("kind") == "q_mismatch" for w in run.trace.warnings))


def q_mismatch_finding(warnings: list):
    bad = [w for w in warnings if w.get("kind") == "q_mismatch"]
    if not bad:
        return None
    worst = max(w["tv"] for w in bad)
    return findings.finding(
        "acceptance_rule",
        f"sampling rule fed the wrong q in {len(bad)} round(s)",
        f"the q the acceptance rule min(1, p/q) was given differs from the distribution the drafts "
        f"were sampled from by total variation up to {worst:.2f}: not lossless with sampling",
        "q taken from the raw logits while the drafts were drawn from the processed ones "
        "(temperature, warpers): transformers #47932",
        "compute q from exactly the processed logits the drafts were sampled from",
        evidence={"rounds": len(bad), "max_tv": worst, "first_round": bad[0]["round"]})
