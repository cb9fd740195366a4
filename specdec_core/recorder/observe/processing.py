"""Declared logit processing (issue 42; docs/recorder.md, "Declared processing and the exact
rules"): the drafter's `draft_top_k`, `draft_top_p` (q) and the target's `target_top_k`,
`target_top_p`, `target_repetition_penalty` (p). Each model's rows are stored from the PROCESSED
logits in HF's order; the raw argmax is kept (`raw_argmax`) to name a penalty not applied."""
from __future__ import annotations

import math

import torch
from transformers import RepetitionPenaltyLogitsProcessor, TopKLogitsWarper, TopPLogitsWarper

from specdec_core.decoding.knobs import Knob

_TOP_P = dict(minimum=0.0, maximum=1.0, exclude=(0.0,), nullable=True)
# declared like the engine's knobs (decoding/knobs.py: type, range, one-line refusal); the engine
# has no knob of these names (its repetition_penalty is a draft gate on CJK characters)
KNOBS = {name: Knob(type_, name=name, exclude_msg=f"{name} must be in (0, 1], got 0" if "top_p" in name
                    else f"{name} must be > 0, got 0", **kw)
         for name, type_, kw in (("draft_top_k", "int", dict(minimum=1, maximum=10 ** 7, nullable=True)),
                                 ("draft_top_p", "float", _TOP_P),
                                 ("target_top_k", "int", dict(minimum=1, maximum=10 ** 7, nullable=True)),
                                 ("target_top_p", "float", _TOP_P),
                                 ("target_repetition_penalty", "float",
                                  dict(minimum=0.0, maximum=math.inf, exclude=(0.0,), nullable=True)))}
ROLE = {"edge": "draft", "cloud": "target"}
OUT = -1e4        # log-prob of a token the processing removes (finite: JSON, exp() is 0)


def for_role(declared: dict, role: str) -> dict:
    """{"top_k", "top_p", "penalty"} declared for this model (edge: draft_*, cloud: target_*);
    values that change nothing (top_p 1, penalty 1; the knobs' checks refuse top_p > 1) are
    left out."""
    side = ROLE[role]
    d = {"top_k": declared.get(f"{side}_top_k"), "top_p": declared.get(f"{side}_top_p"),
         "penalty": declared.get(f"{side}_repetition_penalty")}
    noop = {"top_p": 1, "penalty": 1}
    return {k: v for k, v in d.items() if v is not None and v != noop.get(k)}


@torch.no_grad()
def apply(logits: torch.Tensor, proc: dict, T: float | None, ctx: list[int] | None,
          first: int) -> torch.Tensor:
    """[t, V] processed logits (removed tokens at OUT below the row's minimum), by transformers'
    own processors in generate's order. `first`: the index in ctx of row 0's input token (row r
    is penalised on ctx[:first + r + 1]). Top-k/top-p apply only at T > 0 (argmax unchanged)."""
    x = logits.float().clone()
    if proc.get("penalty") and ctx is not None:
        pen = RepetitionPenaltyLogitsProcessor(proc["penalty"])
        x = torch.cat([pen(torch.tensor([ctx[:first + r + 1]], dtype=torch.long, device=x.device), x[r:r + 1])
                       for r in range(x.shape[0])])
    if not T or T <= 0:
        return x
    z = x / T
    if proc.get("top_k"):
        z = TopKLogitsWarper(int(proc["top_k"]))(None, z)
    if proc.get("top_p"):
        z = TopPLogitsWarper(proc["top_p"])(None, z)
    low = x.min(-1, keepdim=True).values + OUT * max(1.0, T)
    return torch.where(torch.isneginf(z), low, x)


class Watch:
    """The Recorder's side: per forward, the logits its rows are computed from (processed when
    processing is declared for the model that ran) and what rows add: `raw_argmax` (the
    unprocessed choice) on a processed model; on the edge, with a target penalty declared,
    `penalised_argmax` (a loop may penalise its drafts as generate's assistant does)."""

    def __init__(self, declared: dict):
        for name, knob in KNOBS.items():     # a one-line UserError for a value no loop could apply
            knob.check(declared.get(name))
        self.T = float(declared.get("temperature") or 0.0)
        self.proc = {role: for_role(declared, role) for role in ROLE}
        self.penalty = self.proc["cloud"].get("penalty")
        self.held: dict = {}                 # cache id -> the ids it holds

    def context(self, rec: dict) -> list[int]:
        """Every id before and including this forward's inputs (in input order), from the ids
        each cache holds: a row's repetition penalty sees what generate's input_ids would hold."""
        L, key = rec.get("cache_len") or 0, rec.get("cache")
        ctx = (self.held.get(key, [])[:L] if key is not None else []) + list(rec.get("ids") or [])
        if key is not None and rec.get("use_cache") is not False:
            self.held[key] = ctx
        return ctx

    def logits(self, who: str, rec: dict, logits: torch.Tensor):
        proc = self.proc.get(who)
        pen = proc.get("penalty") if proc else (self.penalty if who == "edge" else None)
        if not proc and not pen:
            return logits, {}
        t = logits.shape[0]
        ctx = self.context(rec) if pen else None
        first = (rec.get("cache_len") or 0) + len(rec.get("ids") or []) - t
        if not proc:
            return logits, {"penalised_argmax": apply(logits, {"penalty": pen}, 0, ctx, first)
                            .argmax(-1).tolist()}
        out = apply(logits, proc, self.T, ctx, first)
        extra = {"raw_argmax": logits.argmax(-1).tolist()}
        if self.T > 0 and (who == "edge" or pen):      # raw vs processed on a fixed set
            extra["penalty_rows" if who == "cloud" else "q_rows"] = penalty_rows(logits, out, self.T)
        return out, extra


def penalty_rows(raw: torch.Tensor, proc: torch.Tensor, T: float) -> list:
    """Per row, for S = the raw top-5 and the processed top-5 (a set fixed before the outcome):
    [ids, raw log-probs at T, processed log-probs at T] (recorder/checks/sampling/penalty.py for the
    cloud, q_check.py for the edge)."""
    a = torch.log_softmax(raw.float() / T, -1)
    b = torch.log_softmax(proc.float() / T, -1)
    ids = torch.cat([torch.topk(a, min(5, a.shape[-1]), -1).indices,
                     torch.topk(b, min(5, b.shape[-1]), -1).indices], -1)
    out = []
    for r in range(raw.shape[0]):
        s = sorted(set(ids[r].tolist()))
        ix = torch.tensor(s, device=a.device)
        out.append([s, [round(x, 5) for x in a[r, ix].tolist()],
                    [round(max(x, OUT), 5) for x in b[r, ix].tolist()]])
    return out
