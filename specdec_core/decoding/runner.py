"""ModelRunner: one causal LM plus its KV cache, fed in absolute positions.

The decoder only ever talks to runners, so the cache bookkeeping (what the model has really
seen) lives here and nowhere else. Positions are always passed explicitly: after a rollback
the cache length and the next position must agree, and being explicit makes that checkable.
"""
from __future__ import annotations

import time

import torch
from transformers import DynamicCache


class ModelRunner:
    def __init__(self, model, vocab_size: int | None = None):
        self.model = model
        self.device = next(model.parameters()).device
        # Logits are compared on the shared vocabulary (e.g. Omni 7B head is larger than 3B's).
        self.vocab_size = vocab_size
        self.cache = None
        self.seen = 0
        self.history: list[int] = []   # the ids the cache holds, for the debug invariant
        self.forwards = 0
        self.check_forwards = 0   # cache-free recomputes, kept out of the speed metrics
        self.busy_s = 0.0         # wall time inside feed() (the forwards): the run's time split
        self._prefill_kwargs: dict = {}
        self._prompt_ids: torch.Tensor | None = None
        self._pending = False

    # -- the three operations the decoder uses ----------------------------------------------
    def prefill(self, prompt) -> None:
        """Take the prompt; it is fed (all but its last token, which the first round feeds) at
        the first feed(), so a model that is never consulted costs nothing."""
        self._prompt_ids = prompt.input_ids.to(self.device)
        self._prefill_kwargs = dict(prompt.prefill_kwargs)
        self.cache = DynamicCache()
        self.seen = self._prompt_ids.shape[1] - 1
        self.history = self._prompt_ids[0, : self.seen].tolist()
        self._pending = self.seen > 0

    @torch.inference_mode()
    def feed(self, ids: list[int], last_only: bool = False) -> torch.Tensor:
        """Feed tokens at positions seen..seen+n-1; returns [n, V] float32 next-token logits
        ([1, V] for the last position only with last_only, which drafting needs)."""
        t0 = time.perf_counter()
        if self._pending:
            self._pending = False
            self._forward(self._prompt_ids[:, : self.seen], 0, prefill=True)
        t = torch.tensor([ids], dtype=torch.long, device=self.device)
        logits = self._forward(t, self.cache_len(), prefill=False, last_only=last_only)
        self.seen += len(ids)
        self.history.extend(ids)
        if logits.is_cuda:      # the forward's GPU time belongs here, not to the next .item()
            torch.cuda.synchronize(logits.device)
        self.busy_s += time.perf_counter() - t0
        return logits

    def crop(self, n: int) -> None:
        """Keep only the first n positions of the cache (transformers 5 crop takes -removed)."""
        drop = self.cache_len() - n
        if drop > 0:
            self.cache.crop(-drop)
        self.seen = n
        del self.history[n:]

    # -- introspection ------------------------------------------------------------------------
    def cache_len(self) -> int:
        if self._pending:
            return self.seen
        return 0 if self.cache is None else self.cache.get_seq_length()

    @torch.inference_mode()
    def recompute_last(self, generated: list[int]) -> torch.Tensor:
        """Next-token logits for prompt + generated, from scratch (no cache): the reference
        the cached path must agree with."""
        gen = torch.tensor([generated], dtype=torch.long, device=self.device)
        ids = torch.cat([self._prompt_ids, gen], dim=1)
        out = self.model(input_ids=ids, position_ids=self.positions(0, ids.shape[1]),
                         use_cache=False, **self._prefill_kwargs)
        self.check_forwards += 1
        return self._cut(out.logits[0, -1:])[0]

    # -- hooks for backends (Omni: mrope positions) and faults -------------------------------
    def positions(self, start: int, n: int) -> torch.Tensor:
        return torch.arange(start, start + n, device=self.device).unsqueeze(0)

    def _forward(self, ids: torch.Tensor, start: int, prefill: bool, last_only: bool = False) -> torch.Tensor:
        extra = dict(self._prefill_kwargs) if prefill else {}
        if last_only or prefill:
            extra["logits_to_keep"] = 1
        out = self.model(input_ids=ids, position_ids=self.positions(start, ids.shape[1]),
                         past_key_values=self.cache, use_cache=True, **extra)
        self.cache = out.past_key_values
        self.forwards += 1
        return self._cut(out.logits[0])

    def _cut(self, logits: torch.Tensor) -> torch.Tensor:
        if self.vocab_size is not None:
            logits = logits[..., : self.vocab_size]
        return logits.float()
