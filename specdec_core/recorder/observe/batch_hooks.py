"""What the flight recorder keeps of a forward with batch > 1 (docs/recorder.md, "Batches"): per
row its real ids, padding, positions and scored rows, zeroed attended slots (`zeroed`), and where
moved slots' keys (`tape_src`) or a moved row (`from`) came from; normalize/batch_rows.py splits it."""
from __future__ import annotations

import torch

from specdec_core.recorder.observe import Observer, fed_next
from specdec_core.recorder.observe.tree_hooks import last_keys, sources


def _positions(pos, b: int, keep):
    if not isinstance(pos, torch.Tensor) or pos.dim() != 2:
        return None
    return [int(x) for x in pos[min(b, pos.shape[0] - 1)][keep.to(pos.device)].tolist()]


def _real(cur, m) -> list:
    """Per batch row, the keys its real slots (mask `m` [batch, slots]) hold, on the CPU."""
    w = min(cur.shape[1], m.shape[1])
    return [cur[b, :w][m[b, :w].to(cur.device)].float().cpu() for b in range(m.shape[0])]


class Batches(Observer):
    """Per cache, each row's real slots' keys after its latest forward; per (role, row) the last
    scored row's log-probs (the rank of the token the row is fed next)."""

    def __init__(self, recorder):
        super().__init__(recorder)
        self.keys: dict = {}
        self.held: dict = {}

    def pre(self, rec: dict, call) -> None:
        ids, mask, cache, positions = call.ids, call.mask, call.cache, call.kwargs.get("position_ids")
        if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[0] < 2:
            return
        B, n = ids.shape
        L = rec.get("cache_len") or 0
        if mask is None or isinstance(mask, dict):
            m = torch.ones(B, L + n, dtype=torch.bool)
        elif isinstance(mask, torch.Tensor) and mask.dim() == 2 and tuple(mask.shape) == (B, L + n):
            m = mask.detach().bool().cpu()
        else:
            shape = list(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
            rec["batch_rows"] = None
            rec["batch_layout"] = f"attention mask {shape} for batch {B}, cache {L}, {n} new: padding not readable"
            return
        ids_c = ids.detach().cpu()
        rows = [{"ids": [int(x) for x in ids_c[b][m[b, L:]].tolist()], "pad": int((~m[b, :L]).sum()),
                 "position_ids": _positions(positions, b, m[b, L:])} for b in range(B)]
        rec["batch_rows"] = rows
        rec["_real"] = m
        self._zeroed(rows, cache, m[:, :L])
        self._moves(rec, cache, m[:, :L])

    @staticmethod
    def _zeroed(rows: list, cache, cached) -> None:
        """Cached slots whose keys are all zero yet attended (mask 1): a rollback that zeroed a
        row's rejected tail instead of masking it; each adds e^0 to the softmax denominator."""
        cur = last_keys(cache)
        if cur is None or cur.shape[0] != len(rows) or cur.shape[1] < cached.shape[1]:
            return
        z = (cur[:, :cached.shape[1]] == 0).all(-1).cpu() & cached
        for b in z.any(-1).nonzero().reshape(-1).tolist():
            rows[b]["zeroed"] = z[b].nonzero().reshape(-1).tolist()

    def _moves(self, rec: dict, cache, cached) -> None:
        cur = last_keys(cache)
        if cur is None or cur.shape[0] != cached.shape[0]:
            return
        now = _real(cur, cached)
        old = self.keys.get(rec.get("cache"))
        if old is None and cached.any():
            old = self._adopt(rec, now)            # a new cache object built from gathered rows
        if old is None or len(now) != len(old):
            return
        moved, seen = {}, None
        for b, row in enumerate(rec["batch_rows"]):
            was = old[b]
            if now[b].shape[0] <= was.shape[0] and torch.equal(now[b], was[:now[b].shape[0]]):
                continue                                   # the row's slots kept (maybe cropped)
            # a row the loop moved to another slot: followed by its content, not its slot
            seen = seen or [{k.numpy().tobytes() for k in o} for o in old]
            hits = [sum(k.numpy().tobytes() in o for k in now[b]) for o in seen]
            c = max(range(len(old)), key=hits.__getitem__)
            if hits[c] > hits[b]:
                row["from"], was, moved[b] = c, old[c], c
            if now[b].shape[0] > was.shape[0] or not torch.equal(now[b], was[:now[b].shape[0]]):
                row["tape_src"] = sources(was, now[b])
        if moved:                      # the next-fed rank follows the row to its new slot
            who = rec.get("model")
            prev = {b: self.held.pop((who, b), None) for b in range(len(old))}
            for b in range(len(old)):
                if prev[moved.get(b, b)] is not None:
                    self.held[(who, b)] = prev[moved.get(b, b)]

    def _adopt(self, rec: dict, now: list) -> list | None:
        """A cache object never seen (a loop that rebuilds its cache from gathered tensors every
        step, as lucidrains' tuples are): the recorded cache most of whose rows' slots it holds
        gives it its id, so the rows' tapes continue through the moved slots; its rows' keys."""
        total = sum(x.shape[0] for x in now)
        for key, old in reversed(list(self.keys.items())):
            if len(old) != len(now) or old[0].shape[-1] != now[0].shape[-1]:
                continue
            found = sum(int((o[None] == x[:, None]).all(-1).any(-1).sum()) if o.numel() else 0
                        for o, x in zip(old, now))
            if total and found >= 0.5 * total:
                rec["cache"] = key
                return old
        return None

    def post(self, rec: dict, call) -> None:
        who, logits, cache = call.who, call.logits, call.cache
        m = rec.pop("_real", None)
        if m is None or rec.get("batch_rows") is None:
            return
        n = len(rec["ids"] or [])
        for b, row in enumerate(rec["batch_rows"]):
            keep = m[b, m.shape[1] - n:]
            fed_next(self.held.pop((who, b), None), row["ids"], rec["i"])
            if isinstance(logits, torch.Tensor) and logits.dim() == 3 and logits.shape[0] > b:
                t = logits.shape[1]
                idx = keep.nonzero().reshape(-1)
                idx = idx[idx >= n - t] - (n - t)
                row["rows"], last = self.r.score(logits[b, idx.to(logits.device)], row["ids"])
                self.held[(who, b)] = (row, last)
            else:
                row["rows"] = None
        cur = last_keys(cache)
        if cur is not None and rec.get("use_cache") is not False and cur.shape[0] == m.shape[0]:
            self.keys[rec.get("cache")] = _real(cur, m)
