"""Drafting with a head on the cloud's features (EAGLE-style, issue 35).

`FeatureRunner` is mixed into the cloud's runner: every cloud forward keeps the last hidden
states of the positions it was fed (a hook on the final norm), cropped with the cache.
`HeadRunner` has the ModelRunner interface the draft step uses. The input feature of position p
is the cloud's feature at p-1 when the cloud has verified p-1, else the head's own prediction;
after a verify `crop` also drops the head's KV entries computed from its own features, so the
accepted tokens are re-fed with the cloud's (EAGLE). The `stale_features` fault skips that
(vllm #14649); the Recorder finds it blind (recorder/observe/head_hooks.py)."""
from __future__ import annotations

from contextlib import contextmanager

import torch

from specdec_core.decoding.runner import ModelRunner, tree_mask
from specdec_core.errors import ConfigError


def final_norm(model):
    """The module whose output is the last hidden state the LM head reads."""
    base = getattr(model, "model", model)
    base = getattr(base, "language_model", base)       # an Omni thinker's text model
    return getattr(base, "norm", None) or getattr(base, "final_layernorm")


class FeatureRunner:
    """Mixin for the cloud runner: `features` [positions, hidden] of what the cache holds."""

    features: torch.Tensor | None = None

    def _forward(self, ids, start, prefill, keep=0, mask=None):
        if self.static:     # the features are the static step's second output
            logits = super()._forward(ids, start, prefill, keep, mask=mask)
            new = self.step_features.detach().float()
        else:
            with _grab(self.model) as grabbed:
                logits = super()._forward(ids, start, prefill, keep, mask=mask)
            new = grabbed[-1][0].detach().float()
        slot = start if isinstance(start, int) else self._len      # tree rows: cache slots
        old = self.features[:slot] if self.features is not None else new[:0]
        self.features = torch.cat([old, new], dim=0)
        return logits

    def _static_call(self, extra):
        base = super()._static_call(extra)

        def call(*args):       # under a CUDA graph the hook fires at capture only: its tensor
            with _grab(self.model) as grabbed:       # is returned, and every replay rewrites it
                logits = base(*args)
            return logits, grabbed[-1][0]
        return call

    def compact(self, slots, ids, gather=True) -> None:
        """A tree's accepted path kept (decoding/tree_round.py): its features follow its slots."""
        if self.features is not None:
            keep = self.features[slots] if gather and slots else self.features[self.seen:self.seen + len(slots)]
            self.features = torch.cat([self.features[: self.seen], keep], dim=0)
        super().compact(slots, ids, gather)

    def crop(self, n: int) -> None:
        super().crop(n)
        if self.features is not None:
            self.features = self.features[:n]

    def ensure_prefilled(self) -> None:
        """The head needs the prompt's features before it drafts: feed the prompt now (one
        forward, as EAGLE's target prefill) instead of merging it into the first verify."""
        if self._pending:
            self.prefill_alone()


class HeadRunner(ModelRunner):
    """The draft head behind the runner interface; `stale=True` is the stale_features fault."""

    merge_prefill = True

    def __init__(self, head, cloud_runner, cloud_model, vocab_size=None, stale: bool = False):
        super().__init__(head, vocab_size)
        self.cloud_runner, self.cloud_model, self.stale = cloud_runner, cloud_model, stale
        h, dev = head.config.hidden_size, self.device       # kept on the head's device (a GPU)
        self.own = torch.zeros(0, h, device=dev)    # the head's predicted features
        self.trusted = 0    # leading positions whose KV entries came from the cloud's features
        self.used = torch.zeros(0, h, device=dev)   # input feature behind each KV entry

    def feed(self, ids, last_only=False):
        self.cloud_runner.ensure_prefilled()
        return super().feed(ids, last_only)

    def crop(self, n: int) -> None:
        keep = n if self.stale else min(n, self.trusted)
        super().crop(keep)
        self.own = self.own[:n]
        self.trusted = min(self.trusted, keep)

    def feed_tree(self, ids, pos, sees, base):
        """Tree drafting (EAGLE-2): each node is fed with its parent's predicted feature (the
        depth-1 nodes: the head's feature of the last committed token, slot base-1)."""
        self.tree_parents = [sorted(s for s in cols if s >= base)[-2:-1] or [base - 1]
                             for cols in sees]
        return super().feed_tree(ids, pos, sees, base)

    def input_features(self, start: int, n: int) -> tuple[torch.Tensor, bool]:
        """Features of positions start-1..start+n-2, and whether all came from the cloud."""
        cloud = self.cloud_runner.features
        have = 0 if cloud is None else cloud.shape[0]
        rows, all_cloud = [], True
        for p in range(start - 1, start + n - 1):
            own_ok = 0 <= p < self.own.shape[0]
            if p < 0:
                rows.append(self.own.new_zeros(self.own.shape[1]))
            elif p < have and not (self.stale and own_ok):
                rows.append(cloud[p])
            elif own_ok:
                rows.append(self.own[p])
                all_cloud = False
            else:
                raise RuntimeError(f"head drafter: no feature for position {p}")
        return torch.stack(rows), all_cloud

    def _forward(self, ids, start, prefill, keep=0, mask=None):
        n = ids.shape[1]
        if mask is None:
            feats, all_cloud = self.input_features(start, n)
            pos = self.positions(start, n)
        else:                   # a tree: rows fed with their parents' features, slots from _len
            feats, all_cloud = self.own[[p for (p,) in self.tree_parents]], False
            pos, start = start, self._len
        feats = feats.to(dtype=next(self.model.parameters()).dtype, device=self.device)
        if self.static:
            out = self.static.step(self, ids, pos, mask, self._head_call, eager=prefill, rows=(feats,))
        else:
            out = self._head_call(ids, pos, mask, feats)
        self.own = torch.cat([self.own[:start], out.detach().float()], dim=0)
        self.used = torch.cat([self.used[:start], feats.float()], dim=0)
        if all_cloud and self.trusted == start:
            self.trusted = start + n
        rows = out[-keep:] if keep else out
        return self._cut(self.cloud_model.get_output_embeddings()(rows))

    def _head_call(self, ids, pos, vis, feats):
        """The head's step on its cache; `vis` a tree's (or engine=static's: the step at a fixed
        width, features padded with zeros) visibility, else causal."""
        mask = {} if vis is None else {"attention_mask": tree_mask(vis, False, self.model, self.device)}
        emb = self.cloud_model.get_input_embeddings()(ids)
        return self.model(feats[None], emb, cache=self.cache, position_ids=pos, **mask)[0]

    @torch.inference_mode()
    def recompute_last(self, generated):
        """The head's next-token logits over prompt + generated without its cache, from the
        features its cached entries were made from: the reference for the cache check (stale
        features are the recorder's stale_features finding, not a cache desync)."""
        ids = torch.cat([self._prompt_ids, torch.tensor([generated], dtype=torch.long,
                                                        device=self.device)], dim=1)
        feats = self.used[: ids.shape[1]]    # the features the cached entries were made from
        dtype = next(self.model.parameters()).dtype
        out = self.model(feats[None].to(dtype), self.cloud_model.get_input_embeddings()(ids),
                         position_ids=self.positions(0, ids.shape[1]))[0, -1:]
        return self._cut(self.cloud_model.get_output_embeddings()(out))[0]


@contextmanager
def _grab(model):
    """What the model's final norm outputs while inside the `with` (a list)."""
    into: list = []
    hook = final_norm(model).register_forward_hook(
        lambda _m, _i, out: into.append(out[0] if isinstance(out, tuple) else out))
    try:
        yield into
    finally:
        hook.remove()


def head_runners(backend, cloud_runner, stale: bool = False, sampled_tree: bool = False):
    """(cloud runner that keeps its features, head runner) for drafter=head; with a draft tree
    (EAGLE-2) greedy only: the recorder reads a sampled tree's drafts from the re-fed path's
    rows, which a head computes from the cloud's features (not the rows it drafted from)."""
    head = getattr(backend, "head", None)
    if head is None:
        raise ConfigError(f"drafter=head: the {backend.name} backend has no draft head")
    if sampled_tree:
        raise ConfigError("drafter=head with a draft tree is greedy only (verify=greedy); "
                          "sampled head trees are not judged correctly yet")
    base = cloud_runner.__class__
    cloud_runner.__class__ = type(f"Feature{base.__name__}", (FeatureRunner, base), {})
    head_runner = HeadRunner(head, cloud_runner, backend.cloud,
                             vocab_size=backend.shared_vocab, stale=stale)
    return cloud_runner, head_runner
