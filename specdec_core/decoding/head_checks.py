"""Blind check of a head drafter's features (issue 35, `stale_features`, docs/findings.md): the
features behind the head's KV entries against the cloud's last hidden states at the same
positions, and what stale ones cost in first-draft acceptance (vllm #14649)."""
from __future__ import annotations

import torch

from specdec_core import findings

TOL = 1e-3     # cosine distance; the same tensor differs by ~1e-7


class FeatureProbe:
    def __init__(self):
        self.checked = 0
        self.stale_positions = 0
        self.worst = 0.0
        self.pairs: list[tuple[int, int, int]] = []   # (position, drafted, drafted from cloud's)

    def before(self, runner) -> bool:
        """Compare the kept entries' features with the cloud's; True where they differ."""
        cloud = runner.cloud_runner.features
        keep = min(runner.seen, runner.used.shape[0], 0 if cloud is None else cloud.shape[0] + 1)
        if keep < 2:
            return False
        used, ref = runner.used[1:keep], cloud[: keep - 1]
        dist = 1 - torch.nn.functional.cosine_similarity(used, ref, dim=-1)
        self.checked += int(dist.numel())
        bad = int((dist > TOL).sum())
        if not bad:
            return False
        self.stale_positions += bad
        self.worst = max(self.worst, float(dist.max()))
        return True

    def after(self, runner, cached_last: torch.Tensor) -> None:
        fresh = fresh_next_logits(runner)
        self.pairs.append((runner.seen, int(cached_last.argmax()), int(fresh.argmax())))


@torch.inference_mode()
def fresh_next_logits(runner) -> torch.Tensor:
    """The head's next-token logits over everything it has seen, every input feature the
    cloud's, no cache: what the round's first draft would have been with the right features."""
    ids = torch.tensor([runner.history], dtype=torch.long, device=runner.device)
    cloud = runner.cloud_runner.features
    n = ids.shape[1]
    feats = torch.cat([torch.zeros(1, cloud.shape[1]), cloud[: n - 1].cpu()], dim=0)
    dtype = next(runner.model.parameters()).dtype
    out = runner.model(feats[None].to(dtype), runner.cloud_model.get_input_embeddings()(ids),
                       position_ids=runner.positions(0, n))[0, -1:]
    runner.check_forwards += 1
    return runner._cut(runner.cloud_model.get_output_embeddings()(out))[0]


def stale_features_finding(probe: FeatureProbe, token_ids: list[int], prompt_len: int):
    """The warning, or None. token_ids: prompt + generated (the committed sequence)."""
    if not probe.stale_positions:
        return None
    judged = [(d, f, token_ids[p]) for p, d, f in probe.pairs if p < len(token_ids)]
    used = sum(d == t for d, _, t in judged) / max(1, len(judged))
    right = sum(f == t for _, f, t in judged) / max(1, len(judged))
    return findings.finding(
        "stale_features",
        f"head drafter reads stale features: {probe.stale_positions} of {probe.checked} "
        f"checked cache entries",
        f"the head's KV entries for accepted tokens were computed from its own predicted features, "
        f"not the cloud's (cosine distance up to {probe.worst:.3f}); over {len(judged)} rounds the "
        f"first draft was accepted {used:.0%} of the time, {right:.0%} with the cloud's features: "
        f"the stale features cost {max(0.0, right - used):.0%} first-draft acceptance",
        "after a verify the accepted tokens keep the head's approximated features (vllm #14649)",
        "re-feed the accepted tokens to the head with the cloud's last hidden states from the "
        "verify forward (crop the head's cache to the last position fed with cloud features)",
        evidence={"stale_positions": probe.stale_positions, "checked": probe.checked,
                  "max_cosine_distance": round(probe.worst, 4), "rounds": len(judged),
                  "first_draft_acceptance": round(used, 3),
                  "first_draft_acceptance_with_cloud_features": round(right, 3),
                  "acceptance_cost": round(max(0.0, right - used), 3)})


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
