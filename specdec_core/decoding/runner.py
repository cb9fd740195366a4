"""ModelRunner: one causal LM plus its KV cache, fed in absolute positions.
The cache bookkeeping lives here and nowhere else; positions are always explicit, so that after
a rollback the cache length and the next position can be checked to agree."""
from __future__ import annotations

import time
import weakref
from contextlib import contextmanager

import torch
from transformers import DynamicCache

from specdec_core.compat import cache_gather, output_cache, static_cache, with_cache
from specdec_core.decoding import lean
from specdec_core.decoding.device_time import DeviceClock
from specdec_core.decoding.engine import hooked


class ModelRunner:
    # The prompt is fed together with the first feed() in ONE forward (as HF generate does); a
    # runner whose prefill must stay a forward of its own (Omni, a fault) sets False.
    merge_prefill = True
    static = None    # engine=static|graphs: a decoding/engine.py StaticPlan (None: eager)

    def __init__(self, model, vocab_size: int | None = None):
        self.model = model
        self.device = next(model.parameters()).device
        # Logits are compared on the shared vocabulary (e.g. Omni 7B head is larger than 3B's).
        self.vocab_size = vocab_size
        self.cache = None
        self.seen = 0
        self._len = 0                  # positions the KV cache holds (kept by feed and crop)
        self.history: list[int] = []   # the ids the cache holds, for the debug invariant
        self.forwards = 0         # decode forwards (feed() calls)
        self.busy_s = 0.0         # wall time inside feed() (the forwards): the run's time split
        self._prefill_kwargs: dict = {}
        self._pos = torch.zeros(1, 0, dtype=torch.long)
        self._masks: bool | None = None   # hand the model its causal mask (prepared_masks)
        self._prompt_ids: torch.Tensor | None = None
        self._pending = False
        self.device_clock = DeviceClock.for_device(self.device)   # CUDA events (device_time.py)

    # -- the three operations the decoder uses ----------------------------------------------
    def prefill(self, prompt) -> None:
        """Take the prompt; it is fed (all but its last token, which the first round feeds) at
        the first feed(), so a model that is never consulted costs nothing."""
        self._prompt_ids = prompt.input_ids.to(self.device)
        self._prefill_kwargs = dict(prompt.prefill_kwargs)
        self.cache = static_cache(self.model, self.static.kv_len) if self.static else DynamicCache()
        self._len = 0
        self.seen = self._prompt_ids.shape[1] - 1
        self.history = self._prompt_ids[0, : self.seen].tolist()
        self._pending = self.seen > 0

    def feed(self, ids: list[int], last_only: bool = False) -> torch.Tensor:
        """Feed tokens at positions seen..seen+n-1; returns [n, V] float32 next-token logits
        ([1, V] for the last position only with last_only, which drafting needs). The first
        feed also carries the prompt: one forward, prefill and step together."""
        if not torch.is_inference_mode_enabled():   # the decoder enters it once per round
            with torch.inference_mode():
                return self.feed(ids, last_only)
        with self._timed():
            t = torch.tensor([ids], dtype=torch.long, device=self.device)
            if self._pending and not self.merge_prefill:
                self.prefill_alone()
            prefill, self._pending = self._pending, False
            if prefill:
                t = torch.cat([self._prompt_ids[:, : self.seen], t], dim=1)
            logits = self._forward(t, self._len, prefill=prefill, keep=1 if last_only else len(ids))
            self._len += t.shape[1]
            self.seen += len(ids)
            self.history.extend(ids)
        return logits

    def prefill_alone(self) -> None:
        """The pending prompt in a forward of its own (not counted as a decode forward)."""
        self._pending = False
        self._forward(self._prompt_ids[:, : self.seen], 0, prefill=True, keep=1)
        self._len = self.seen

    @contextmanager
    def _timed(self):
        """Around one decode forward: counted, its wall time (GPU work included) in busy_s
        (the run's time split), its device time on the clock (device_time.py)."""
        t0 = time.perf_counter()
        ev = self.device_clock.start() if self.device_clock else None
        yield
        if ev is not None:
            self.device_clock.stop(ev)
            torch.cuda.synchronize(self.device)   # the GPU time belongs here, not to the next .item()
        self.forwards += 1        # decode forwards: a prompt-only prefill is not counted
        self.busy_s += time.perf_counter() - t0

    def crop(self, n: int) -> None:
        """Keep only the first n positions of the cache (transformers 5 crop takes -removed)."""
        if self._len > n:
            if not self.static:             # static: rollback by write position (slots stay, masked)
                self.cache.crop(n - self._len)
            self._len = n
        self.seen = n
        del self.history[n:]

    # -- trees (decoding/tree_round.py) --------------------------------------------------------
    def feed_tree(self, ids: list[int], pos: list[int], sees: list[list[int]], base: int) -> torch.Tensor:
        """ONE forward over `ids` at absolute positions `pos` with a tree mask: new row r sees every
        cached slot below `base` plus the absolute slots `sees[r]` (its own included). Returns [n, V]
        logits; `seen` is not advanced: the caller keeps its path with `compact`."""
        if not torch.is_inference_mode_enabled():
            with torch.inference_mode():
                return self.feed_tree(ids, pos, sees, base)
        with self._timed():
            t, p = torch.tensor([ids], device=self.device), torch.tensor([pos], device=self.device)
            pre = self._prompt_ids[:, : self.seen] if self._pending else t[:, :0]
            self._pending, m, past = False, pre.shape[1], self._len
            vis = torch.zeros(m + len(ids), past + m + len(ids), dtype=torch.bool)
            vis[:m, past: past + m] = torch.ones(m, m, dtype=torch.bool).tril()
            vis[m:, :base] = True
            for r, cols in enumerate(sees):
                vis[m + r, cols] = True
            t, p = torch.cat([pre, t], 1), torch.cat([self.positions(0, m), p], 1)
            logits = self._forward(t, p, prefill=m > 0, keep=len(ids), mask=vis)
            self._len += t.shape[1]
        return logits

    def compact(self, slots: list[int], ids: list[int], gather: bool = True) -> None:
        """Keep, after what this runner has seen, only the tree slots `slots` (the accepted
        path, fed as `ids`): their keys and values are copied down (gather=False keeps the first
        len(slots) slots instead: the no_compaction fault), the rest is cropped."""
        if gather and slots:
            cache_gather(self.cache, self.seen, slots)
        self.history.extend(ids)
        ModelRunner.crop(self, self.seen + len(slots))   # this runner's own crop, not a fault's

    def cache_len(self) -> int:
        """What the cache object holds (the debug invariant reads it; the hot path keeps
        `_len` instead of asking the cache every step)."""
        if self._pending:
            return self.seen
        if self.static:       # a static cache's slots past the write position are dead
            return self._len
        return 0 if self.cache is None else self.cache.get_seq_length()

    @torch.inference_mode()
    def recompute_last(self, generated: list[int]) -> torch.Tensor:
        """Next-token logits for prompt + generated, from scratch (no cache): the reference
        the cached path must agree with."""
        gen = torch.tensor([generated], dtype=torch.long, device=self.device)
        ids = torch.cat([self._prompt_ids, gen], dim=1)
        out = self.model(input_ids=ids, position_ids=self.positions(0, ids.shape[1]),
                         use_cache=False, **self._prefill_kwargs)
        return self._cut(out.logits[0, -1:])[0]

    # -- hooks for backends (Omni: mrope positions) and faults -------------------------------
    def positions(self, start: int, n: int) -> torch.Tensor:
        """[1, n] positions start..start+n-1 (a view of one arange that grows when needed)."""
        end = start + n
        if end > self._pos.shape[1]:
            with torch.inference_mode(False):   # usable in and out of inference mode
                self._pos = torch.arange(max(end, 2 * self._pos.shape[1]), device=self.device)[None]
        return self._pos[:, start:end]

    def _forward(self, ids: torch.Tensor, start, prefill: bool, keep: int = 0,
                 mask: torch.Tensor | None = None) -> torch.Tensor:
        """One model call on `ids` at positions start.. (or the [1, n] positions `start`);
        logits of the last `keep` positions (0 = all). `mask`: a tree's [n, past + n] bool
        visibility, handed to the model as a 4D mask."""
        extra = dict(self._prefill_kwargs) if prefill else {}
        if self._masks is None:
            self._masks = prepared_masks(self.model)
        pos = start if isinstance(start, torch.Tensor) else self.positions(start, ids.shape[1])
        if self.static:
            rows = self.static.step(self, ids, pos, mask, self._static_call(extra), eager=prefill)
            rows, self.step_features = rows if isinstance(rows, tuple) else (rows, None)
            return self._cut(rows[-keep:] if keep else rows)
        if mask is not None:
            extra["attention_mask"] = tree_mask(mask, self._masks, self.model, self.device)
        elif self._masks and "attention_mask" not in extra:
            extra["attention_mask"] = {"full_attention": causal_mask(self._len, ids.shape[1], self.device)}
        return self._cut(self._call(ids, pos, extra, keep))

    def _call(self, ids: torch.Tensor, pos: torch.Tensor, extra: dict, keep: int = 0) -> torch.Tensor:
        """The model on its cache (or its layer loop, decoding/lean.py: a prepared mask, no
        prompt kwargs such as audio, no hooks on the model: a recording sees its own forward);
        [n, V] logits of the last `keep` positions (0 = all)."""
        if self._lean_ok(extra):
            return lean.forward(self.model, ids, pos, extra["attention_mask"]["full_attention"], self.cache, keep)
        out = self.model(input_ids=ids, position_ids=pos, use_cache=True, **with_cache(self.model, self.cache),
                         **extra, **({"logits_to_keep": keep} if keep else {}))
        self.cache = output_cache(out)
        return out.logits[0]

    def _lean_ok(self, extra: dict) -> bool:
        return (bool(self._masks) and set(extra) <= {"attention_mask"}
                and not hooked(self.model) and lean.usable(self.model, causal_mask))

    def _static_call(self, extra: dict):
        """engine=static: the model call at a fixed width, with the plan's [w, kv_len] mask."""
        return lambda ids, pos, vis: self._call(
            ids, pos, {**extra, "attention_mask": tree_mask(vis, self._masks, self.model, self.device)})

    def _cut(self, logits: torch.Tensor) -> torch.Tensor:
        if self.vocab_size is not None and logits.shape[-1] > self.vocab_size:
            logits = logits[..., : self.vocab_size]
        return logits if logits.dtype == torch.float32 else logits.float()


# -- the causal mask, handed to the model ------------------------------------------------------
_PREPARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def causal_mask(past: int, n: int, device) -> torch.Tensor | None:
    """The mask a transformers sdpa model builds for n new tokens after `past` cached ones, for
    one unpadded sequence: None (sdpa's own causal rule) for a prefill or a single token, else
    [1, 1, n, past + n] bool, True where position j may attend to key i (i <= past + j)."""
    if past == 0 or n == 1:
        return None
    kv = torch.arange(past + n, device=device)
    return (kv[None, :] <= kv[past:, None])[None, None]


def tree_mask(vis: torch.Tensor, prepared: bool, model, device):
    """A tree's visibility as the model takes it: the prepared bool mapping (sdpa models the
    runner checked), else a 4D additive float mask (what tree loops hand a model)."""
    vis = vis.to(device)[None, None]
    if prepared:
        return {"full_attention": vis}
    dtype = next(model.parameters()).dtype
    out = torch.zeros(vis.shape, dtype=dtype, device=device)
    return out.masked_fill_(~vis, torch.finfo(dtype).min)


def prepared_masks(model) -> bool:
    """Whether the runner may hand `model` its causal mask as {"full_attention": mask}.

    transformers 5 decoder models rebuild the mask in Python on every forward unless given a
    prepared mapping. Only for sdpa attention with full attention on every layer, checked once per
    model object (a prefill and a two-token step must give exactly the model's own logits); a model
    with forward hooks (a recording) is not probed and keeps building its own masks."""
    cfg = getattr(model, "config", None)
    impl = getattr(cfg, "_attn_implementation", None)
    known = _PREPARED.get(model)
    if known is not None and known[0] == impl:   # asked again after set_attn_implementation
        return known[1]
    if (impl != "sdpa" or not getattr(cfg, "is_causal", True)
            or set(getattr(cfg, "layer_types", None) or ()) != {"full_attention"}):
        ok = False
    elif hooked(model):
        return False
    else:
        ok = lean.same_logits(model, lambda ids, pos, cache, past: model(
            input_ids=ids, position_ids=pos, use_cache=True, **with_cache(model, cache),
            attention_mask={"full_attention": causal_mask(past, ids.shape[1], pos.device)}).logits[0])
    _PREPARED[model] = (impl, ok)
    return ok
