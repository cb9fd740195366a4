"""Distributions and acceptance rules. Pure tensor math, no model, no state but a Generator."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specdec_core.decoding.link import LinkCost


def probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """The distribution a token is drawn from. Temperature is applied here and only here;
    at temperature 0 the reported distribution is the untempered softmax (the pick is argmax)."""
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    return torch.softmax(logits, dim=-1)


def entropy(p: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats over the last dim (0 * log 0 = 0)."""
    return -(p * torch.log(p.clamp_min(1e-30))).sum(-1)


def draw(w: torch.Tensor, gen: torch.Generator) -> int:
    """One index drawn in proportion to the weights w. The Generator is the decoder's (on the CPU):
    weights on a GPU are copied to it for the draw, so a seed draws the same numbers whatever
    device the models run on."""
    return int(torch.multinomial(w.to(gen.device), 1, generator=gen))


def pick(p: torch.Tensor | None, logits: torch.Tensor, temperature: float, gen: torch.Generator) -> int:
    if temperature <= 0:
        return int(torch.argmax(logits))
    return draw(p, gen)


def rank_of(logits: torch.Tensor, token: int) -> int:
    """1-based rank of token under logits (ties counted in the token's favour)."""
    return int((logits > logits[token]).sum()) + 1


@dataclass
class Verdict:
    """A verifier's answer on one drafted block (decoding/verifier.py; backends/remote.py)."""
    accepted: int        # how many draft tokens were accepted
    next_token: int      # correction (if accepted < n) or bonus token
    ranks: list[int]     # cloud rank of each checked draft token
    target_probs: list[float]   # cloud probability of each checked draft token
    next_prob: float = 0.0   # the cloud's probability of next_token (at the temperature)
    next_rank: int = 1       # its rank under the cloud's logits
    cloud_fed: int = 0       # positions the cloud computed for this call (set by the verifier)
    cost: LinkCost = field(default_factory=LinkCost)   # what the call cost on the link
    # per committed row (accepted drafts, then the correction/bonus): the cloud's [top-1 id,
    # top-2 id, top-1 - top-2 logit margin], what the bug-or-numerics verdict needs (None: unknown)
    top2: list | None = None


def verify(rule: str, draft: list[int], q: torch.Tensor | None, logits: torch.Tensor,
           temperature: float, rank_threshold: int, gen: torch.Generator) -> Verdict:
    """Decide on a drafted block. draft: n drafted ids; q: [n, V] draft distributions they were
    drawn from (sampling rule); logits: [n + 1, V] cloud logits, row j for draft j, row n the bonus."""
    if temperature <= 0 and rule != "rank":
        return verify_greedy(draft, logits)
    n = len(draft)
    p = probs(logits, temperature)
    d = torch.tensor(draft, dtype=torch.long)
    p_d = p[torch.arange(n), d] if n else p.new_zeros(0)
    ranks = ((logits[:n] > logits[torch.arange(n), d].unsqueeze(1)).sum(-1) + 1) if n else d
    # here the temperature is > 0, except for the rank rule
    if rule == "sampling":
        u = torch.rand(n, generator=gen).to(p_d.device)
        ok = u <= (p_d / q[torch.arange(n), d].clamp_min(1e-30)).clamp(max=1.0)
    elif rule == "rank":
        ok = ranks <= rank_threshold
    else:  # the greedy rule at a temperature: accept while the draft is the cloud's argmax
        ok = d == (logits[:n].argmax(-1) if n else d)
    bad = (~ok).nonzero()
    a = int(bad[0]) if len(bad) else n

    if a < n and rule == "sampling":
        residual = (p[a] - q[a]).clamp_min(0)
        s = residual.sum()
        nxt = draw(residual / s, gen) if s > 0 else int(p[a].argmax())
    else:
        nxt = pick(p[a], logits[a], temperature, gen)
    checked = min(a + 1, n)
    return Verdict(a, nxt, ranks[:checked].tolist(), p_d[:checked].tolist(),
                   next_prob=float(p[a, nxt]), next_rank=rank_of(logits[a], nxt))


def verify_greedy(draft: list[int], logits: torch.Tensor) -> Verdict:
    """The greedy rule (and sampling at temperature 0, where both distributions are one-hot):
    accept while the draft is the cloud's argmax. One argmax over all rows decides, in Python;
    probabilities are computed only for the rows the cloud judged. An accepted draft and the
    next token are argmaxes, so their rank is 1; only a rejected draft needs counting."""
    top = logits.argmax(-1).tolist()
    n, a = len(draft), 0
    while a < n and draft[a] == top[a]:
        a += 1
    nxt = top[a]
    judged = draft[: a + 1]                    # the accepted drafts and the rejected one
    p = probs(logits[: a + 1], 0.0)
    got = p[list(range(len(judged))) + [a], judged + [nxt]].tolist()
    ranks = [1] * a + ([rank_of(logits[a], draft[a])] if a < n else [])
    return Verdict(a, nxt, ranks, got[:-1], next_prob=got[-1], next_rank=1)
