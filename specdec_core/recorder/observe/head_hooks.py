"""Recording a head drafter (issue 35): the `drafter=` module fed the cloud's hidden states, its
forwards recorded as the edge's plus the feature fingerprints (docs/recorder.md, "Head drafters")."""
from __future__ import annotations

import time

import torch

from specdec_core.compat import forward_cache
from specdec_core.decoding.head import final_norm
from specdec_core.recorder.observe import Observer

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


class HeadWatch(Observer):
    """The Recorder's hooks for a head drafter (`recorder.drafter`) and the cloud's features (see
    module doc); none without one."""

    def __init__(self, recorder):
        super().__init__(recorder)
        self.head, self.cloud = recorder.drafter, recorder.models["cloud"]
        self.cloud_ids: list[int] = []
        self.cloud_feats: torch.Tensor | None = None
        self.ids: list[int] = []
        self.used: torch.Tensor | None = None
        self.embedded = False        # the head was fed embeddings, not ids
        self._busy = False           # our own cache-free re-run is not recorded
        self.shift: int | None = None   # 1: fed (feature of t, token t+1) at t (EAGLE), 0: ours
        self.tree: tuple | None = None  # (start, {path of ids: slot}) of the last cloud tree
        self.verified = False           # the last head input lies wholly in the cloud's context

    def attach(self) -> list:
        if self.head is None:
            return []
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
        moves = [(a, b) for a, b in rec.get("slot_moves") or () if 0 <= b < len(self.cloud_ids)
                 and a < len(self.cloud_ids)]            # a tree's accepted path copied down
        old = {b: (self.cloud_ids[b], self.cloud_feats[b].clone()) for _, b in moves}
        for slot, src in moves:
            self.cloud_ids[slot], self.cloud_feats[slot] = old[src]
        self.cloud_ids = self.cloud_ids[:keep] + list(rec["ids"])
        self.cloud_feats = _cat(self.cloud_feats, keep, x[0].detach().float().cpu())
        self.tree = _paths(rec, keep)

    # -- the head's forwards -----------------------------------------------------------------
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
        feats = args[0] if args else kwargs.get("features", kwargs.get("hidden_states"))
        toks = args[1] if len(args) > 1 else next(
            (kwargs[k] for k in ("input_ids", "token_embeds", "inputs_embeds") if k in kwargs), None)
        ids = self._ids(toks)
        cache = forward_cache(module, args, kwargs)
        keep = int(cache.get_seq_length()) if hasattr(cache, "get_seq_length") else 0
        self.ids = self.ids[:keep] + ([int(i) for i in ids[0]] if ids is not None else [])
        x = feats.reshape(-1, feats.shape[-1]).detach().float().cpu()
        self.used = _cat(self.used, keep, x)
        seen = {"fp": fingerprint(x), **self._compare()}
        if seen.pop("shift"):
            seen["shift"] = 1
        own = time.perf_counter() - h0           # the hook's own cost, never the loop's
        self.r._pre("head", module, (), {"input_ids": ids, "cache": cache,   # a tree's mask too
                                         "position_ids": kwargs.get("position_ids"),
                                         "attention_mask": kwargs.get("attention_mask")})
        rec = self.r.forwards[-1]
        rec["model"], rec["module"], rec["features"] = "edge", "head", seen
        rec["time"]["pre"] += own

    def _canon(self, shift: int):
        """The head's ids and input features in our coordinates (position q: token q, feature
        of q-1); with EAGLE's shift the raw row t is position t+1 and position 0 is the prompt's
        first id, fed to no head row."""
        if not shift:
            return self.ids, self.used
        first = self.cloud_ids[:1] or [-1]
        return first + self.ids, torch.cat([torch.zeros_like(self.used[:1]), self.used])

    def _along(self, ids: list[int]) -> list[int]:
        """For each position i of `ids`: the row of cloud_feats that is the cloud's feature of
        ids[i] in the context ids[:i+1], as long as there is one; tree slots by their path."""
        start, paths = self.tree or (len(self.cloud_ids), {})
        out = []
        for i, t in enumerate(ids):
            j = (i if i < len(self.cloud_ids) and self.cloud_ids[i] == t else None) if i < start \
                else paths.get(tuple(ids[start:i + 1]))
            if j is None:
                break
            out.append(start + j if i >= start else j)
        return out

    def _dist(self, shift: int):
        """(canonical ids, rows of cloud_feats along them, cosine distances of positions 1..)."""
        ids, used = self._canon(shift)
        idx = self._along(ids)
        n = min(len(ids), used.shape[0], len(idx) + 1)
        if n < 2 or self.cloud_feats is None:
            return ids, idx, torch.zeros(0)
        ref = self.cloud_feats[torch.tensor(idx[: n - 1])]
        return ids, idx, 1 - torch.nn.functional.cosine_similarity(used[1:n], ref, dim=-1)

    def _decide(self) -> int:
        """Which input layout explains the fed ids and features: ours or shifted by one (EAGLE);
        fixed once one explains at least 2 more positions than the other."""
        if self.shift is None and self.cloud_feats is not None:
            score = [(len(idx), int((dist <= TOL).sum())) for _, idx, dist in map(self._dist, (0, 1))]
            if abs(score[0][0] - score[1][0]) >= 2 or abs(score[0][1] - score[1][1]) >= 2:
                self.shift = int(score[1] > score[0])
        return self.shift or 0

    def _compare(self) -> dict:
        """The head's input feature at q (for position q-1) against the cloud's at q-1 in the same
        context (positions in our coordinates, whatever the layout the loop feeds)."""
        shift = self._decide()
        ids, idx, dist = self._dist(shift)
        self.verified = len(idx) >= len(ids) - 1   # the whole input is the cloud's context
        if not dist.numel():
            return {"checked": 0, "stale": [], "max_dist": 0.0, "shift": shift}
        bad = (dist > TOL).nonzero().reshape(-1)
        out = {"checked": int(dist.numel()), "stale": [int(i) + 1 for i in bad],
               "max_dist": round(float(dist.max()), 4), "shift": shift}
        slots = self._other_slots([int(i) + 1 for i in bad], shift)
        if slots:
            out["other_slots"] = slots
        return out

    def _other_slots(self, stale: list[int], shift: int) -> int:
        """Stale positions whose feature is the cloud's feature of ANOTHER slot of the last tree
        (a head fed tree slots instead of the accepted path)."""
        if not stale or self.tree is None:
            return 0
        used = self._canon(shift)[1]
        slots = self.cloud_feats[self.tree[0]:]
        if not slots.shape[0]:
            return 0
        x = torch.nn.functional.normalize(used[torch.tensor(stale)], dim=-1)
        sim = x @ torch.nn.functional.normalize(slots, dim=-1).T
        return int(((1 - sim) <= TOL).any(-1).sum())

    def _post(self, module, args, kwargs, output):
        if self._busy:
            return
        rec = self.r._pending["head"][-1] if self.r._pending["head"] else None
        # as a forward returning (logits, cache): the Recorder keeps what the cache now holds
        self.r._post("head", module, args, kwargs, (self.logits(output), forward_cache(module, args, kwargs)))
        if rec is not None and rec["features"]["stale"] and self.verified:
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
        """The first draft the head makes from the cloud's features, cache-free, fed in the
        loop's own layout."""
        shift = self.shift or 0
        ids, idx, _ = self._dist(shift)
        feats = torch.cat([torch.zeros(1, self.cloud_feats.shape[1]),
                           self.cloud_feats[torch.tensor(idx[: len(ids) - 1], dtype=torch.long)]])
        feats, ids = feats[shift:], ids[shift:]
        n = len(ids)
        ids = torch.tensor([ids], dtype=torch.long, device=self.cloud.device)
        toks = self.cloud.get_input_embeddings()(ids) if self.embedded else ids
        dtype = next(module.parameters()).dtype
        self._busy = True
        try:
            out = module(feats[None].to(dtype=dtype, device=ids.device), toks,
                         position_ids=torch.arange(n, device=ids.device)[None])
        finally:
            self._busy = False
        return int(self.logits(out)[0, -1].argmax())


def _paths(rec: dict, start: int) -> tuple | None:
    """A cloud tree forward's nodes by their path from `start` (the ids of the columns each
    node's mask row sees from `start` on, itself last): {path: slot - start}."""
    m, ids = rec.get("mask_rows"), rec["ids"]
    if not m:
        return None
    common = list(range(start, max(m["from"], start)))
    paths = {}
    for j, row in enumerate(m["rows"]):
        cols = sorted({c for c in common + row if start <= c < start + j})
        paths.setdefault(tuple(ids[c - start] for c in cols) + (ids[j],), j)
    return start, paths
