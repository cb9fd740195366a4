"""Stopping by token id only (seed 000 A): the EOS id list, max_new_tokens, and the
first-sentence rule. String stops truncate on any "。" or "Please" and miss `<|im_end|>` once
special tokens are skipped (docs/architecture.md, "Stops, cancel and the time limit")."""
from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Protocol

import torch
from transformers import EosTokenCriteria, MaxLengthCriteria, StoppingCriteria, StoppingCriteriaList

from specdec_core.errors import ConfigError
from specdec_core.decoding.vocab import TokenClasses


class Stop(StrEnum):
    """Why a run ended. Members are strings ("eos" == Stop.EOS), so traces stay plain JSON."""
    EOS = "eos"
    SENTENCE = "sentence"
    MAX_TOKENS = "max_tokens"
    CYCLE = "cycle"              # cycle_action=stop
    FAULT = "fault"              # a fault's own stop rule (the bug zoo)
    CANCELLED = "cancelled"
    TIME_LIMIT = "time_limit"    # cfg.time_limit_s ran out


class Stopper(Protocol):
    def __call__(self, seq) -> Stop | None:
        """seq: the run's TokenSeq; its last id (seq.last) is the token just drafted or
        committed, seq.n_gen counts generated ids including it."""


def _id_set(ids, what: str) -> frozenset[int]:
    if isinstance(ids, TokenClasses):
        return frozenset(ids.ids("sentence_end"))
    if isinstance(ids, int) or (isinstance(ids, torch.Tensor) and ids.dim() == 0):
        ids = [int(ids)]
    try:
        return frozenset(int(i) for i in ids)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} must be a list of token ids, got {ids!r}") from None


class EosIdStop(EosTokenCriteria):
    """Stop a row when its last token is one of `eos_ids`. transformers' own criterion: its
    `eos_token_id` is how `generate` fills rows that already stopped (so batched rows stop apart)."""

    def __init__(self, eos_ids: Iterable[int]):
        self.eos_ids = _id_set(eos_ids, "eos_ids")
        super().__init__(torch.tensor(sorted(self.eos_ids), dtype=torch.long))


class FirstSentenceStop(StoppingCriteria):
    """Stop a row at its first sentence-final token once `min_new_tokens` were generated (counting
    the token just generated). Stateless, so one instance serves many generate calls."""

    def __init__(self, classes_or_ids, prompt_len: int, min_new_tokens: int = 0):
        self.sentence_ids = _id_set(classes_or_ids, "sentence ids")
        self._t = torch.tensor(sorted(self.sentence_ids), dtype=torch.long)
        self.prompt_len = int(prompt_len)
        self.min_new_tokens = int(min_new_tokens)

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        if input_ids.shape[1] - self.prompt_len < self.min_new_tokens:
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        return torch.isin(input_ids[:, -1], self._t.to(input_ids.device))


class StopChecker:
    """The fixed stop rule, O(1) per token: check(n_generated, last_id) with n_generated counting
    last_id. Precedence: "eos", then "sentence" (last_id sentence-final and n_generated >=
    min_new_tokens; sentence_ids None disables it), then "max_tokens"; None = go on."""

    def __init__(self, eos_ids: Iterable[int], sentence_ids, prompt_len: int,
                 min_new_tokens: int, max_new_tokens: int):
        if max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if min_new_tokens < 0:
            raise ConfigError(f"min_new_tokens must be >= 0, got {min_new_tokens}")
        self.eos_ids = _id_set(eos_ids, "eos_ids")
        self.sentence_ids = None if sentence_ids is None else _id_set(sentence_ids, "sentence ids")
        self.prompt_len = int(prompt_len)
        self.min_new_tokens = int(min_new_tokens)
        self.max_new_tokens = int(max_new_tokens)

    def check(self, n_generated: int, last_id: int) -> Stop | None:
        if last_id in self.eos_ids:
            return Stop.EOS
        if (self.sentence_ids is not None and n_generated >= self.min_new_tokens
                and last_id in self.sentence_ids):
            return Stop.SENTENCE
        if n_generated >= self.max_new_tokens:
            return Stop.MAX_TOKENS
        return None

    def __call__(self, seq) -> Stop | None:   # the Stopper protocol
        return self.check(seq.n_gen, seq.last)

    def criteria(self) -> StoppingCriteriaList:
        """The same rules for `model.generate(stopping_criteria=...)`. Pass the same prompt
        length; the MaxLengthCriteria here takes precedence over generate's own."""
        out = StoppingCriteriaList([EosIdStop(self.eos_ids)])
        if self.sentence_ids is not None:
            out.append(FirstSentenceStop(self.sentence_ids, self.prompt_len, self.min_new_tokens))
        out.append(MaxLengthCriteria(max_length=self.prompt_len + self.max_new_tokens))
        return out


def build_stopper(cfg, classes: TokenClasses, stop_ids: Iterable[int], prompt_len: int) -> StopChecker:
    """The stop rule a DecodeConfig asks for: EOS ids, first sentence (if stop_at_first_sentence,
    after min_new_tokens), max_new_tokens."""
    sentence = classes.ids("sentence_end") if cfg.stop_at_first_sentence else None
    return StopChecker(stop_ids, sentence, prompt_len, cfg.min_new_tokens, cfg.max_new_tokens)
