"""Verifiers: one cloud call deciding on a drafted block.
It returns a `sampling.Verdict`. `LogitsVerifier` runs the cloud model in this process (any
acceptance rule, from its logits); a runner that brings its own verifier (backends/remote.py) is
asked for it by `make_verifier`."""
from __future__ import annotations

import torch

from specdec_core.decoding import sampling
from specdec_core.decoding.link import LinkModel


def top2_rows(logits) -> list[list]:
    """[[id1, id2, margin]] per row, exact ties in argmax order (lowest id first)."""
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
        self.link = LinkModel(cfg.link_rtt_ms, cfg.link_uplink_kbps)
        self._prompt_sent = False
        # U-HLM: the sampling rule needs the draft probability of each token at the cloud.
        self._with_probs = cfg.verify == "sampling" and cfg.temperature > 0

    def __call__(self, full: list[int], block: list[int], q) -> sampling.Verdict:
        cfg, r = self.cfg, self.runner
        catch_up = full[r.seen:]
        n_ids = len(catch_up) + len(block)
        if not self._prompt_sent:        # the first call also carries the prompt
            n_ids += r.seen
            self._prompt_sent = True
        logits = r.feed(catch_up + block)[len(catch_up) - 1:]
        v = sampling.verify(cfg.verify, block, q, logits, cfg.temperature, cfg.rank_threshold, self.gen)
        v.cloud_fed, v.cost = len(catch_up) + len(block), self.link.call(n_ids, self._with_probs)
        v.top2 = top2_rows(logits[: v.accepted + 1])
        return v
