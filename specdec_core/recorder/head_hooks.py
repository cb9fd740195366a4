"""Recording a head drafter (issue 35): the `drafter=` module fed the cloud's hidden states, its
forwards recorded as the edge's plus the feature fingerprints (docs/recorder.md, "Head drafters")."""
from __future__ import annotations

import time

import torch

from specdec_core.analysis.divergence import common_prefix
from specdec_core.compat import forward_cache
from specdec_core.decoding.head import final_norm

TOL = 1e-3       # cosine distance; the same tensor through a cast differs by ~1e-7
PROJ = 4


def fingerprint(x: torch.Tensor) -> list[list[float]]:
    """Per row: [norm, 4 projections on fixed random unit directions] (seeded per width)."""
    g = torch.Generator().manual_seed(0)
    p = torch.randn(x.shape[-1], PROJ, generator=g)
    p = p / p.norm(dim=0, keepdim=True)
    x = x.float().cpu()
    return [[round(float(n), 4)] + [round(float(v), 4) for v in r]
            for n, r in zip(x.norm(dim=-1), x @ p)]


def _cat(old: torch.Tensor | None, keep: int, new: torch.Tensor) -> torch.Tensor:
    return new if old is None else torch.cat([old[:keep], new], dim=0)


class HeadWatch:
    """The Recorder's hooks for a head drafter and the cloud's features (see module doc)."""

    def __init__(self, recorder, head, cloud):
        self.r, self.head, self.cloud = recorder, head, cloud
        self.r._pending.setdefault("head", [])
        self.cloud_ids: list[int] = []
        self.cloud_feats: torch.Tensor | None = None
        self.ids: list[int] = []
        self.used: torch.Tensor | None = None
        self.embedded = False        # the head was fed embeddings, not ids
        self._busy = False           # our own cache-free re-run is not recorded

    def attach(self) -> list:
        return [final_norm(self.cloud).register_forward_hook(self._grab),
                self.head.register_forward_pre_hook(self._pre, with_kwargs=True),
                self.head.register_forward_hook(self._post, with_kwargs=True)]

    # -- the cloud's features ----------------------------------------------------------------
    def _grab(self, _module, _args, out):
        pending = self.r._pending.get("cloud")
        if not pending or not pending[-1].get("ids"):
            return
        rec, x = pending[-1], (out[0] if isinstance(out, tuple) else out)
        if x.dim() != 3 or x.shape[1] != len(rec["ids"]):
            return
        keep = rec.get("cache_len") or 0
        self.cloud_ids = self.cloud_ids[:keep] + list(rec["ids"])
        self.cloud_feats = _cat(self.cloud_feats, keep, x[0].detach().float().cpu())

    # -- the head's forwards -----------------------------------------------------------------
    def _inputs(self, args, kwargs):
        feats = args[0] if args else kwargs.get("features", kwargs.get("hidden_states"))
        toks = args[1] if len(args) > 1 else next(
            (kwargs[k] for k in ("input_ids", "token_embeds", "inputs_embeds") if k in kwargs), None)
        return feats, toks

    def _ids(self, toks) -> torch.Tensor | None:
        if not isinstance(toks, torch.Tensor):
            return None
        if not toks.is_floating_point():
            return toks.reshape(1, -1)
        self.embedded = True
        w = self.cloud.get_input_embeddings().weight.float()
        e = toks.reshape(-1, toks.shape[-1]).float().to(w.device)
        d = torch.cdist(e, w, compute_mode="donot_use_mm_for_euclid_dist")
        ids = d.argmin(-1)
        return ids[None] if bool((d.min(-1).values <= 1e-4 * (1 + e.norm(dim=-1))).all()) else None

    def _pre(self, module, args, kwargs):
        if self._busy:
            return
        h0 = time.perf_counter()
        feats, toks = self._inputs(args, kwargs)
        ids = self._ids(toks)
        cache = forward_cache(module, args, kwargs)
        keep = int(cache.get_seq_length()) if hasattr(cache, "get_seq_length") else 0
        self.ids = self.ids[:keep] + ([int(i) for i in ids[0]] if ids is not None else [])
        x = feats.reshape(-1, feats.shape[-1]).detach().float().cpu()
        self.used = _cat(self.used, keep, x)
        seen = {"fp": fingerprint(x), **self._compare()}
        own = time.perf_counter() - h0           # the hook's own cost, never the loop's
        self.r._pre("head")(module, (), {"input_ids": ids, "cache": cache,   # a tree's mask too
                                          "position_ids": kwargs.get("position_ids"),
                                          "attention_mask": kwargs.get("attention_mask")})
        rec = self.r.forwards[-1]
        rec["model"], rec["module"], rec["features"] = "edge", "head", seen
        rec["time"]["pre"] += own

    def _verified(self) -> int:
        """Positions 0..v-1 whose cloud features are the cloud's in the head's own context."""
        return min(common_prefix(self.ids, self.cloud_ids), 0 if self.cloud_feats is None else self.cloud_feats.shape[0])

    def _compare(self) -> dict:
        """The head's input feature at q (for position q-1) against the cloud's at q-1."""
        n = min(len(self.ids), self.used.shape[0], self._verified() + 1)
        if n < 2:
            return {"checked": 0, "stale": [], "max_dist": 0.0}
        dist = 1 - torch.nn.functional.cosine_similarity(self.used[1:n], self.cloud_feats[: n - 1],
                                                         dim=-1)
        bad = (dist > TOL).nonzero().reshape(-1)
        return {"checked": n - 1, "stale": [int(i) + 1 for i in bad],
                "max_dist": round(float(dist.max()), 4)}

    def _post(self, module, args, kwargs, output):
        if self._busy:
            return
        rec = self.r._pending["head"][-1] if self.r._pending["head"] else None
        logits = self.logits(output)
        self.r._post("head")(module, args, kwargs, (logits,))
        cache = forward_cache(module, args, kwargs)
        if rec is not None and cache is not None:
            self.r._keys.written(cache, rec["cache"])
        if rec is not None and rec["features"]["stale"] and len(self.ids) - 1 <= self._verified():
            h0 = time.perf_counter()
            rec["features"]["fresh_next"] = self._fresh_next(module)
            rec["time"]["post"] = round(rec["time"]["post"] + time.perf_counter() - h0, 6)

    def logits(self, output) -> torch.Tensor:
        out = getattr(output, "logits", None)
        if out is None:
            out = output[0] if isinstance(output, tuple) else output
        if out.shape[-1] == self.cloud.get_input_embeddings().weight.shape[-1]:
            with torch.no_grad():
                out = self.cloud.get_output_embeddings()(out)
        return out

    @torch.no_grad()
    def _fresh_next(self, module) -> int:
        """The first draft the head makes from the cloud's features, cache-free."""
        n = len(self.ids)
        feats = torch.cat([torch.zeros(1, self.cloud_feats.shape[1]), self.cloud_feats[: n - 1]])
        ids = torch.tensor([self.ids], dtype=torch.long, device=self.cloud.device)
        toks = self.cloud.get_input_embeddings()(ids) if self.embedded else ids
        dtype = next(module.parameters()).dtype
        self._busy = True
        try:
            out = module(feats[None].to(dtype=dtype, device=ids.device), toks,
                         position_ids=torch.arange(n, device=ids.device)[None])
        finally:
            self._busy = False
        return int(self.logits(out)[0, -1].argmax())
