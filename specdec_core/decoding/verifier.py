"""Verifiers: one cloud call deciding on a drafted block.

The round hands a verifier the committed sequence and the block; it gets back a `Checked`: how
many drafts were accepted, the correction or bonus token, the cloud's rank and probability of
each checked draft, how many positions the cloud computed and what the call cost on the link.
`LogitsVerifier` runs the cloud model in this process (any acceptance rule, from its logits);
a runner that brings its own verifier (backends/remote.py) is asked for it by `make_verifier`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from specdec_core.decoding import sampling
from specdec_core.decoding.link import LinkCost, LinkModel


@dataclass
class Checked:
    accepted: int               # how many draft tokens were accepted
    next_token: int             # correction (accepted < n) or bonus token
    ranks: list[int]            # cloud rank of each checked draft token
    target_probs: list[float]   # cloud probability of each checked draft token
    next_prob: float            # cloud probability of next_token
    next_rank: int              # cloud rank of next_token
    cloud_fed: int              # positions the cloud computed for this call
    cost: LinkCost = field(default_factory=LinkCost)
    # per committed row (accepted drafts, then the correction/bonus): the cloud's [top-1 id,
    # top-2 id, top-1 - top-2 logit margin], what the bug-or-numerics verdict needs (None: unknown)
    top2: list | None = None


def top2_rows(logits) -> list[list]:
    """[[id1, id2, margin]] per row, exact ties in argmax order (lowest id first)."""
    import torch

    vals, ids = torch.topk(logits, 2, -1)
    tie = (vals[:, 0] == vals[:, 1]) & (ids[:, 1] < ids[:, 0])
    ids = torch.where(tie[:, None], ids.flip(-1), ids)
    return [[a, b, round(m, 5)] for (a, b), m in
            zip(ids.tolist(), (vals[:, 0] - vals[:, 1]).tolist())]


def make_verifier(cloud, cfg, gen):
    own = getattr(cloud, "verifier", None)
    return own(cfg, gen) if own is not None else LogitsVerifier(cloud, cfg, gen)


class LogitsVerifier:
    """The cloud is a ModelRunner here: one forward over what it has not seen plus the block,
    the acceptance rule on the logits, and the link modelled from the config's link knobs."""

    def __init__(self, runner, cfg, gen):
        self.runner, self.cfg, self.gen = runner, cfg, gen
        self.link = LinkModel.from_config(cfg)
        self._prompt_sent = False
        # U-HLM: the sampling rule needs the draft probability of each token at the cloud.
        self._with_probs = cfg.verify == "sampling" and cfg.temperature > 0

    def __call__(self, full: list[int], block: list[int], q) -> Checked:
        cfg, r = self.cfg, self.runner
        catch_up = full[r.seen:]
        n_ids = len(catch_up) + len(block)
        if not self._prompt_sent:        # the first call also carries the prompt
            n_ids += r.seen
            self._prompt_sent = True
        logits = r.feed(catch_up + block)[len(catch_up) - 1:]
        v = sampling.verify(cfg.verify, block, q, logits, cfg.temperature, cfg.rank_threshold, self.gen)
        return Checked(v.accepted, v.next_token, v.ranks, v.target_probs,
                       next_prob=v.next_prob, next_rank=v.next_rank,
                       cloud_fed=len(catch_up) + len(block),
                       cost=self.link.call(n_ids, self._with_probs),
                       top2=top2_rows(logits[: v.accepted + 1]))
