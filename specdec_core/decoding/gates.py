"""Draft-side gates: Hugging Face LogitsProcessors that fight punctuation floods and short loops.

From seed 001 (sections C, D, E): a comma/period gate counted in CJK content chars, a ban on the
same CJK char twice in a row, an n-gram ban over the punctuation-stripped CJK history, and a
repetition penalty that never touches punctuation (penalising it makes the model hunt for
substitute punctuation). Being LogitsProcessors, they also work inside `model.generate`, so
baselines match. Each gate sees only history = input_ids[:, start:]; temperature is applied by the
decoder, after the gates."""
from __future__ import annotations

from collections.abc import Mapping

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from specdec_core.errors import ConfigError
from specdec_core.decoding.vocab import TokenClasses

_NEG_INF = float("-inf")


def _ban(scores: torch.Tensor, ban: torch.Tensor) -> torch.Tensor:
    """scores with the `ban` [B, V] entries at -inf. A row that would be left with no finite
    score is returned unchanged: a gate must never turn a step into NaN probabilities.
    (No host sync here, so gates stay cheap on a GPU.)"""
    out = scores.masked_fill(ban, _NEG_INF)
    dead = torch.isneginf(out).all(dim=-1, keepdim=True)
    return torch.where(dead, scores, out)


class _Gate(LogitsProcessor):
    def __init__(self, classes: TokenClasses, start: int = 0):
        if not isinstance(classes, TokenClasses):
            raise TypeError(f"{type(self).__name__} needs TokenClasses, got {type(classes).__name__}")
        if start < 0:
            raise ConfigError(f"start must be >= 0, got {start}")
        self.classes = classes
        self.start = int(start)

    def history(self, input_ids: torch.Tensor) -> torch.Tensor:
        return input_ids[:, self.start:]


class PunctuationGate(_Gate):
    """Forbid comma-like (，、：:,) or period-like (。 .) tokens until at least `min_chars` CJK
    content characters have been generated since the last punctuation token. Counted in
    characters ("说话" counts 2; in "好，说" only the chars after the punctuation count)."""

    def __init__(self, classes: TokenClasses, min_chars: int, which: str = "comma", start: int = 0):
        super().__init__(classes, start)
        if which not in ("comma", "period"):
            raise ConfigError(f"PunctuationGate which must be 'comma' or 'period', got {which!r}")
        if min_chars < 0:
            raise ConfigError(f"PunctuationGate min_chars must be >= 0, got {min_chars}")
        self.min_chars = int(min_chars)
        self.which = which

    def chars_since_punct(self, input_ids: torch.Tensor) -> torch.Tensor:
        """[B] CJK content chars since the last punctuation token of the history."""
        h = self.history(input_ids)
        b, t = h.shape
        if t == 0:
            return torch.zeros(b, dtype=torch.long, device=h.device)
        c = self.classes
        pos = torch.arange(t, device=h.device)
        last = torch.where(c.lookup("punct", h), pos, -1).max(dim=-1).values  # [B], -1 = none
        after = pos.unsqueeze(0) > last.unsqueeze(1)
        n = (c.lookup("cjk_chars", h) * after).sum(dim=-1)
        boundary = h.gather(1, last.clamp_min(0).unsqueeze(1)).squeeze(1)
        return n + torch.where(last >= 0, c.lookup("cjk_tail", boundary), 0)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.min_chars == 0:
            return scores
        blocked = self.chars_since_punct(input_ids) < self.min_chars  # [B]
        mask = self.classes.table(f"{self.which}_like", scores.shape[-1], scores.device)
        return _ban(scores, blocked.unsqueeze(1) & mask.unsqueeze(0))


class AdjacentRepeatBan(_Gate):
    """Forbid the same CJK char twice in a row: if the last token is CJK content, ban it, and
    (for BPE vocabularies) ban every token that starts with the last token's final CJK char."""

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        h = self.history(input_ids)
        if h.shape[1] == 0:
            return scores
        c = self.classes
        v = scores.shape[-1]
        last = h[:, -1]
        tail_char = c.lookup("last_cjk", last)  # [B], -1 = not CJK
        first = c.table("first_cjk", v, scores.device)
        ban = (first.unsqueeze(0) == tail_char.unsqueeze(1)) & (tail_char >= 0).unsqueeze(1)
        same = c.lookup("content", last) & (last < v)  # the last token itself
        col = torch.where(same, last, 0).unsqueeze(1)
        ban |= torch.zeros_like(ban).scatter_(1, col, same.unsqueeze(1))
        return _ban(scores, ban)


class CjkNoRepeatNGram(_Gate):
    """n-gram ban over the punctuation-stripped CJK history: keep only CJK content tokens, and
    ban every z such that (last n-1 content tokens, z) already occurred in that history."""

    def __init__(self, classes: TokenClasses, n: int, start: int = 0):
        super().__init__(classes, start)
        if n < 1:
            raise ConfigError(f"no_repeat_ngram must be >= 1, got {n}")
        self.n = int(n)

    def banned(self, content: torch.Tensor) -> torch.Tensor:
        """Ids to ban after the 1-D content history `content`."""
        n, m = self.n, content.numel()
        if m < n:
            return content[:0]
        if n == 1:
            return content
        grams = content.unfold(0, n, 1)  # [m - n + 1, n]
        hit = (grams[:, :-1] == content[m - n + 1:]).all(dim=-1)
        return grams[hit, -1]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        h = self.history(input_ids)
        if h.shape[1] < self.n:
            return scores
        keep = self.classes.lookup("content", h)
        ban = torch.zeros(scores.shape, dtype=torch.bool, device=scores.device)
        for row in range(h.shape[0]):  # rows differ in content length; per row it is all tensor ops
            z = self.banned(h[row][keep[row]])
            ban[row, z[z < scores.shape[-1]]] = True
        return _ban(scores, ban)


class CjkRepetitionPenalty(_Gate):
    """HF's multiplicative repetition penalty (positive logits divided, negative multiplied),
    applied only to CJK content ids present in the history, never to punctuation."""

    def __init__(self, classes: TokenClasses, penalty: float, start: int = 0):
        super().__init__(classes, start)
        if not penalty > 0:
            raise ConfigError(f"repetition_penalty must be > 0, got {penalty}")
        self.penalty = float(penalty)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        h = self.history(input_ids)
        if h.shape[1] == 0 or self.penalty == 1.0:
            return scores
        v = scores.shape[-1]
        # Gather/scatter over the history only (HF's way); an extra column takes the ids the
        # head does not have, so no id is dropped with a host sync.
        ext = torch.cat([scores, scores.new_zeros(scores.shape[0], 1)], dim=-1)
        col = torch.where(h < v, h, v)
        old = ext.gather(1, col)
        new = torch.where(old > 0, old / self.penalty, old * self.penalty)
        hit = self.classes.lookup("content", col) & (col < v)
        return ext.scatter(1, col, torch.where(hit, new, old))[:, :v]


def build_gates(cfg, tokenizer, start: int = 0) -> LogitsProcessorList:
    """The gates the config switches on, in a fixed order (penalty first, bans after). Off = 0 /
    False / None, and 1.0 for repetition_penalty; with every gate off the vocabulary is never decoded."""
    knob = cfg.get if isinstance(cfg, Mapping) else (lambda name, default: getattr(cfg, name, default))
    comma = int(knob("comma_gate", 0) or 0)
    period = int(knob("period_gate", 0) or 0)
    adjacent = bool(knob("ban_adjacent_repeat", False))
    ngram = int(knob("no_repeat_ngram", 0) or 0)
    penalty = float(knob("repetition_penalty", 1.0) or 1.0)
    gates = LogitsProcessorList()
    if not (comma or period or adjacent or ngram or penalty != 1.0):
        return gates
    classes = tokenizer if isinstance(tokenizer, TokenClasses) else TokenClasses.for_tokenizer(tokenizer)
    if penalty != 1.0:
        gates.append(CjkRepetitionPenalty(classes, penalty, start))
    if adjacent:
        gates.append(AdjacentRepeatBan(classes, start))
    if ngram:
        gates.append(CjkNoRepeatNGram(classes, ngram, start))
    if comma:
        gates.append(PunctuationGate(classes, comma, "comma", start))
    if period:
        gates.append(PunctuationGate(classes, period, "period", start))
    return gates
