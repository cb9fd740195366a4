"""The state of ONE decode: its components, its token sequence and its growing trace.
Built per call of `SpeculativeDecoder.stream` and handed to the round's steps; nothing of it
lives on the decoder, so one decoder object can never mix two decodes."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from specdec_core.decoding.cycles import CycleDetector
from specdec_core.decoding.stopping import Stop, Stopper
from specdec_core.decoding.trace import TokenRecord, Trace


class TokenSeq:
    """prompt + committed ids, then the block being drafted: ONE list and a committed mark.
    Processors, stoppers, the cycle breaker and the runners' catch-up all read this list, so they
    can never disagree."""

    __slots__ = ("ids", "prompt_len", "committed")

    def __init__(self, prompt_ids: list[int]):
        self.ids = list(prompt_ids)
        self.prompt_len = self.committed = len(self.ids)

    def __len__(self) -> int:           # committed length (prompt included)
        return self.committed

    @property
    def n_gen(self) -> int:             # generated ids, pending drafts included
        return len(self.ids) - self.prompt_len

    @property
    def last(self) -> int:
        return self.ids[-1]

    def generated(self) -> list[int]:
        return self.ids[self.prompt_len:]

    def tail(self, n: int) -> list[int]:
        """The last n generated ids (pending drafts included)."""
        return self.ids[max(self.prompt_len, len(self.ids) - n):]

    def tensor(self) -> torch.Tensor:   # [1, len] for logits processors
        return torch.tensor([self.ids], dtype=torch.long)

    def push(self, tok: int) -> None:
        self.ids.append(tok)

    def rollback(self) -> None:
        del self.ids[self.committed:]

    def commit(self, tok: int) -> None:
        self.ids.append(tok)
        self.committed = len(self.ids)


class TextLookup:
    """Token text by id; ids past the tokenizer (padded model vocabularies) show as <id>."""

    def __init__(self, texts):
        self.texts = texts

    def __getitem__(self, i: int) -> str:
        return self.texts[i] if 0 <= i < len(self.texts) else f"<{i}>"


def logits_width(runner) -> int:
    """|V| as the decoder sees it: the width of the runner's logits (its shared-vocabulary cut,
    else the model's output layer)."""
    if getattr(runner, "vocab_size", None):
        return int(runner.vocab_size)
    head = runner.model.get_output_embeddings()
    return int(head.weight.shape[0]) if head is not None else int(runner.model.config.vocab_size)


@dataclass
class Run:
    cfg: object                          # DecodeConfig (faults already applied)
    edge: object                         # ModelRunner
    cloud: object
    processors: object                   # LogitsProcessorList (gates + fault processors)
    stopper: Stopper
    verify: Callable                     # steps.verify, or a fault's wrapper of it
    verifier: Callable                   # decoding/verifier.py: local logits or remote cloud
    commit: Callable                     # steps.commit, or a fault's wrapper of it
    gen: torch.Generator
    seq: TokenSeq
    trace: Trace
    text: TextLookup
    gate: float | None = None            # entropy threshold in nats, resolved once per run
    detail: bool = True                  # per-token alternatives in the trace
    need_p: bool = False                 # a drafted token's distribution is needed while drafting
    cancel: threading.Event | None = None
    deadline: float | None = None        # time.perf_counter() value; None = no limit
    cycles: CycleDetector = field(default_factory=CycleDetector)
    faults: frozenset = frozenset()      # fault names (tree faults bend tree_round.py)
    round: int = 0
    ended_by: str = ""
    new_warnings: list = field(default_factory=list)   # not yet streamed

    def warn(self, w: dict, toast: bool = True) -> None:
        """Record a warning in the trace; toast=True also streams it with the next event."""
        self.trace.warnings.append(w)
        if toast:
            self.new_warnings.append(w)

    def end(self, why: Stop) -> None:
        """The first reason to end wins."""
        if not self.ended_by:
            self.ended_by = Stop(why).value

    def interrupted(self) -> Stop | None:
        """Cancel or time limit: asked before every round and every drafted token."""
        if self.cancel is not None and self.cancel.is_set():
            return Stop.CANCELLED
        if self.deadline is not None and time.perf_counter() >= self.deadline:
            return Stop.TIME_LIMIT
        return None

    def take_warnings(self) -> list:
        out, self.new_warnings = self.new_warnings, []
        return out

    def record(self, r: TokenRecord) -> None:
        """Commit one token: sequence and trace together."""
        r.i = len(self.trace.tokens)
        self.seq.commit(r.id)
        self.trace.tokens.append(r)
