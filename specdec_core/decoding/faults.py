"""The bug zoo: each seed bug re-created behind a name, as a swap of ONE decoder component.
With no faults every FaultSet hook returns what it was given, so the fixed path has no fault
checks in it. Each fault is the smallest faithful copy of the seed's bug."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from transformers import LogitsProcessor, TemperatureLogitsWarper

from specdec_core.decoding.stopping import Stop


@dataclass(frozen=True)
class FaultInfo:
    name: str
    seed: str
    bug: str
    symptom: str
    # what a user sees on the demo pair with the default knobs (greedy, verify every block),
    # measured on the shipped clips: the cloud's verification often hides the text symptom
    seen: str = ""
    # knobs without which the fault's code path does not run (a head fault needs drafter=head)
    needs: tuple = ()

    text = property(lambda f: f"{f.bug}; seen here: {f.seen or f.symptom}")   # `faults` and the page


FAULTS: dict[str, FaultInfo] = {f.name: f for f in [
    FaultInfo("string_stop", "000 A", "stop when the decoded text (draft included) contains 。, a "
              "newline or 'Please', ignoring min_new_tokens", "premature truncation",
              seen="ends on a stop string before the cloud verified the block: unverified_end; text often unchanged"),
    FaultInfo("special_text_stop", "000 A", "look for '<|im_end|>' in text decoded with "
              "skip_special_tokens=True instead of stopping on ids", "never stops, template leakage",
              seen="never stops: missed_eos; runs to max_new_tokens, the next chat turns (user/assistant) leak into the text"),
    FaultInfo("draft_penalties", "000 B", "hand-made penalties on frequent CJK tokens and a custom "
              "top-p in the draft", "fragments, low acceptance",
              seen="text unchanged (the cloud corrects every draft), acceptance collapses to ~2%, hidden_draft_processing"),
    FaultInfo("lenient_rank", "000 C", "rank acceptance with threshold 20", "incoherent tail",
              seen="lossy: 100% acceptance of drafts the cloud ranked up to 20th, text departs from cloud-only"),
    FaultInfo("no_resync", "000 D / 002", "no cache rollback after a correction: rejected drafts "
              "stay in the edge's KV cache", "fractured/repeated text, stale cache",
              seen="text often identical; acceptance drops (to 40–75%), stale_cache"),
    FaultInfo("double_temperature", "001 A", "logits divided by 0.7 and then by the temperature",
              "over-sharp draft, fewer cloud calls, punctuation wins",
              seen="at temperature 0 latent (greedy drafts unchanged); at temperature > 0 over-sharp drafts: hidden_draft_processing"),
    FaultInfo("mask_1x1", "001 B", "1x1 attention mask on incremental draft steps: positions reset",
              "filler punctuation, acceptance collapse, position errors",
              seen="text unchanged; acceptance collapses (~35%), position_error"),
    FaultInfo("input_corruption", "004", "draft tokens appended to the shared input across "
              "iterations", "'HelloHello' doubling",
              seen="'HelloHello' doubling: phrases written twice in a row, context_mismatch"),
    # tree faults (issue 34): they act only with draft_tree = static | dynamic (tree_round.py)
    FaultInfo("tree_parent_slots", "sglang #8228", "tree drafting row r attends to the r-th draft slot "
              "of each earlier depth, not its own ancestors", "lower acceptance, "
              "lossless",
              seen="trees only: lossless; mean acceptance length 3.96 -> 3.91 with static trees on the "
                   "six *_01 clips (dynamic: unchanged there), draft_context when recorded"),
    FaultInfo("no_compaction", "sglang #26982", "after tree verification the cloud cache keeps "
              "the first slots instead of gathering the accepted path", "stale cache, text drifts",
              seen="trees only: the cloud decodes on rejected nodes' keys: text differs from "
                           "cloud-only on 6/6 clips, acceptance length 4.23 -> 3.38 (dynamic)"),
    FaultInfo("linear_positions", "tree masks", "tree positions by slot, not prefix + depth",
              "wrong positions in the verify forward",
              seen="trees only: 6/6 clips differ from cloud-only, acceptance length 4.23 -> 3.42 "
                   "(dynamic)"),
    FaultInfo("sibling_mask", "tree masks", "each tree node also sees its siblings in the verify "
              "mask (a block per parent instead of ancestors only)", "wrong context for nodes",
              seen="trees only: 3/6 clips differ from cloud-only (dynamic), acceptance length "
                   "4.23 -> 4.10"),
    FaultInfo("stale_features", "vllm #14649", "drafter=head: accepted tokens keep the head's "
              "own predicted features instead of the cloud's (its KV entries are not re-fed)",
              "lossless, lower acceptance",
              seen="text unchanged; mean acceptance length 2.76 -> 1.87 at k=4 on the six *_01 "
                   "clips; stale_features warning with the first-draft acceptance it costs",
              needs=(("drafter", "head"),)),
    FaultInfo("raw_q", "transformers #47932", "sampling: q taken from the raw draft logits while "
              "the drafts were sampled from the processed (temperature) ones", "not lossless with "
              "sampling; invisible with greedy",
              seen="greedy unchanged; T=0.8: acceptance 59.3% -> 54.7% on the six *_01 clips, "
                   "acceptance_rule error (q off by TV up to ~0.3)",
              needs=(("drafter", "head"), ("verify", "sampling"), ("temperature", 0.8))),
]}
TREE_FAULTS = ("tree_parent_slots", "no_compaction", "linear_positions", "sibling_mask")


def latent(cfg: dict) -> list[str]:
    """The faults that are on but whose code path changes nothing at these knobs, each in one
    line (issue 50): a clean run with one of them on is not a clean bill for the fault."""
    out = []
    for name in cfg.get("faults") or ():
        f, why = FAULTS.get(name), None
        if name == "double_temperature" and not cfg.get("temperature"):
            why = "dividing the logits twice changes no argmax at temperature 0 (greedy)"
        elif name in TREE_FAULTS and cfg.get("draft_tree", "chain") == "chain":
            why = "it acts on token trees only (draft tree = chain)"
        elif f and f.needs:
            off = [f"{k} = {v}" for k, v in f.needs
                   if (not cfg.get(k) if k == "temperature" else cfg.get(k) != v)]
            why = f"it needs {', '.join(off).replace('temperature = 0.8', 'temperature > 0')}" if off else None
        if why:
            out.append(f"{name.replace('_', ' ')} is latent at these knobs: {why}")
    return out


class FaultSet:
    def __init__(self, names):
        self.names = list(names or [])

    def __contains__(self, name):
        return name in self.names

    def configure(self, cfg):
        if "lenient_rank" in self:
            cfg = dataclasses.replace(cfg, verify="rank", rank_threshold=20)
        return cfg

    def wrap_runner(self, runner, role: str):
        if role == "edge" and "no_resync" in self:
            runner.__class__ = _with(NoResyncRunner, runner.__class__)
        if role == "edge" and "mask_1x1" in self:
            runner.__class__ = _with(ResetPositionRunner, runner.__class__)
        return runner

    def draft_processors(self, classes) -> list:
        out = []
        if "draft_penalties" in self:
            out.append(HandPenalties(classes))
        if "double_temperature" in self:
            out.append(TemperatureLogitsWarper(0.7))   # then the decoder's own temperature
        return out

    def wrap_stopper(self, stopper, tokenizer):
        if "special_text_stop" in self:
            cap = stopper.max_new_tokens
            return TextStop(tokenizer, ("<|im_end|>",), lambda seq: Stop.MAX_TOKENS if seq.n_gen >= cap else None)
        if "string_stop" in self:
            return TextStop(tokenizer, ("。", "\n", "Please"), stopper)
        return stopper

    def wrap_verify(self, verify):
        raw_q, text_stop = "raw_q" in self, "string_stop" in self
        if not (raw_q or text_stop):
            return verify

        def faulty_verify(run, d, q):
            # string_stop fired while drafting: the run ends there, the block unverified
            if text_stop and getattr(run.stopper, "fired", False):
                run.end(Stop.EOS)
                return None
            # raw_q, transformers #47932: the sampling rule gets q from the raw logits (temperature
            # 1, no processing) although the drafts were drawn from the processed distribution
            if raw_q and q is not None and d.rows:
                q = torch.softmax(torch.stack(d.rows).float(), dim=-1)
            return verify(run, d, q)
        return faulty_verify

    def wrap_commit(self, commit):
        if "input_corruption" not in self:
            return commit

        def corrupting_commit(run, records):
            # the draft loop appended its tokens to the shared input; the commit appends them again
            copies = [dataclasses.replace(r, source="draft", target_prob=None, target_rank=None)
                      for r in records if r.source in ("accepted", "draft")]
            return commit(run, copies + records)
        return corrupting_commit


def _with(mixin, base):
    return type(f"{mixin.__name__}{base.__name__}", (mixin, base), {})


# --- runner faults ----------------------------------------------------------------------------
class NoResyncRunner:
    """crop() forgets to remove anything: the decoder thinks the rejected drafts are gone, the
    cache still holds them, and new tokens are placed after them (seed 002)."""

    def crop(self, n: int) -> None:
        self.seen = n
        del self.history[n:]


class ResetPositionRunner:
    """Incremental steps get positions 0..n-1, as with a 1x1 attention mask (seed 001 B)."""

    merge_prefill = False   # the prompt's last token is the first incremental step

    def _forward(self, ids, start, prefill, keep=0, **kw):
        return super()._forward(ids, start if prefill else 0, prefill, keep, **kw)


# --- draft processor faults -----------------------------------------------------------------
class HandPenalties(LogitsProcessor):
    """Seed 000 B: fixed penalties on frequent CJK tokens and punctuation, then a home-made
    top-p that forgets to sort before the cumulative sum."""

    def __init__(self, classes, penalty: float = 3.0, top_p: float = 0.8):
        texts = classes.texts
        frequent = set("的声音调语速说话人，中色")
        self.ids = torch.tensor([i for i, t in enumerate(texts) if t and t in frequent] or [0])
        self.penalty, self.top_p = penalty, top_p

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        scores[:, self.ids] -= self.penalty
        p = torch.softmax(scores, -1)
        keep = torch.cumsum(p, -1) <= self.top_p   # BUG (on purpose): unsorted cumulative sum
        keep[:, 0] = True
        return scores.masked_fill(~keep, float("-inf"))


# --- stopper faults ---------------------------------------------------------------------------
class TextStop:
    """Seed 000 A: stop when the generated text decoded with skip_special_tokens (draft
    included) contains one of `strings`, else ask `rest`. string_stop: 。, a newline or 'Please'
    ("EOS-like"): it fires during drafting, before the cloud has seen the block (see
    wrap_verify). special_text_stop: '<|im_end|>', never in that text, so only `rest` (the
    max_new_tokens cap) is left."""

    def __init__(self, tokenizer, strings: tuple, rest):
        self.tok, self.strings, self.rest = tokenizer, strings, rest
        self.fired = False

    def __call__(self, seq) -> Stop | None:
        text = self.tok.decode(seq.generated(), skip_special_tokens=True)
        if any(s in text for s in self.strings):   # the buggy code believes it saw the end
            self.fired = True
            return Stop.EOS
        return self.rest(seq)
