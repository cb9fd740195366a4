"""What the flight recorder keeps for token trees: `mask_rows` (a non-causal 4D mask, compactly),
`rows["cross"]` (every fed token under every scored row of a tree forward) and `slot_moves`
(cache slots rewritten in place). recorder/normalize/tree.py reads them; docs/recorder.md, "Tree loops"."""
from __future__ import annotations

import torch

from specdec_core.compat import cache_keys
from specdec_core.recorder.observe import Observer

MAX_CROSS = 128      # nodes per forward for which every token is scored under every row


def mask_rows(mask, past: int, n: int) -> dict | None:
    """The compact content of a 4D mask, or None for none / a causal one (padding columns,
    masked for every row, aside). A prepared mapping ({"full_attention": mask}, what generate
    and the built-in runner hand transformers 5 models) is read through."""
    if isinstance(mask, dict):
        mask = mask.get("full_attention", next(iter(mask.values()), None))
    if not isinstance(mask, torch.Tensor) or mask.dim() != 4 or n < 1:
        return None
    m = mask[0, 0, -n:, :past + n]
    vis = (m.bool() if m.dtype == torch.bool else m > torch.finfo(m.dtype).min / 2).cpu()
    if vis.shape[-1] < past + n:
        return None
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    hidden = (~vis[0, :past]).nonzero().reshape(-1)       # causal: hidden columns only lead
    leading = hidden.numel() == 0 or int(hidden[-1]) == hidden.numel() - 1
    if torch.equal(vis[:, past:], causal) and bool((vis[:, :past] == vis[:1, :past]).all()) and leading:
        return None
    seen = vis.all(0)
    lead = int(seen.nonzero()[0]) if seen.any() else 0      # leading padding, hidden from all
    rest = (~seen[lead:]).nonzero()
    c0 = lead + int(rest[0]) if rest.numel() else past + n
    rows = [[c0 + int(j) for j in r.nonzero().reshape(-1).tolist()] for r in vis[:, c0:]]
    return {"from": c0, "rows": rows}


def is_tree(rec: dict) -> bool:
    """A forward that is a tree: a non-causal 4D mask, or (no mask, a text-only model) positions
    that repeat in a tree's layout: non-decreasing over a contiguous range of 2+ depths, as
    Medusa and EAGLE order their nodes. A chain fed at wrong positions is not read as a tree."""
    if rec.get("mask_rows"):
        return True
    pos = rec.get("position_ids")
    if not pos or rec.get("mrope") or len(set(pos)) == len(pos) or len(set(pos)) < 2:
        return False
    return all(a <= b for a, b in zip(pos, pos[1:])) and max(pos) - min(pos) == len(set(pos)) - 1


@torch.no_grad()
def cross(logits: torch.Tensor, ids: list[int]) -> dict | None:
    """rank / log-prob of every fed id under every scored row (rows cover all fed ids)."""
    t = logits.shape[0]
    if t != len(ids) or not 1 < t <= MAX_CROSS:
        return None
    logp = torch.log_softmax(logits.float(), -1)
    idx = torch.tensor(ids, dtype=torch.long, device=logp.device).clamp(0, logp.shape[-1] - 1)
    vals = logp[:, idx]                                          # [rows, ids]
    asc = logp.sort(-1).values                                   # one sort per row
    ranks = logp.shape[-1] - torch.searchsorted(asc, vals.contiguous(), right=True) + 1
    return {"rank": ranks.tolist(),
            "logp": [[round(x, 5) for x in r] for r in vals.tolist()]}


def last_keys(cache) -> torch.Tensor | None:
    """The last layer's keys, head 0: [batch, slots, head_dim], detached. They depend on the whole
    context: the recorder's fingerprint of what each cache slot holds (slots a tree rewrote in
    place, rows a batched loop moved)."""
    t = cache_keys(cache, -1)
    return None if t is None else t[:, 0].detach()


def fingerprint(cache) -> torch.Tensor | None:
    """last_keys on the CPU, copied (a cache may be written in place): what the Recorder keeps
    of each cache after its latest write (hooks._Keys), which Trees compares at the next one."""
    t = last_keys(cache)
    return None if t is None else t.cpu().clone()


def sources(old: torch.Tensor, now) -> list[int]:
    """Per slot of `now`, the slot of `old` holding the same keys (-1: none)."""
    hits = [(old == x).all(-1).nonzero().reshape(-1) for x in now]
    return [int(h[0]) if h.numel() else -1 for h in hits]


class Trees(Observer):
    """Per forward `mask_rows`, `slot_moves` (the slots of its cache that changed since the
    cache's latest forward: its fingerprint then, kept by hooks._Keys; a head drafter's cache
    aside) and `rows["cross"]`; the recording's `draft_shape`."""

    def pre(self, rec, call):
        m = mask_rows(call.mask, rec.get("cache_len") or 0, len(rec.get("ids") or []))
        if m:
            rec["mask_rows"] = m
        old = None if call.role == "head" else self.r._keys.held.get(rec.get("cache"))
        cur = None if old is None or call.cache is None else fingerprint(call.cache)
        if cur is None:
            return
        old, cur = old[0].float(), cur[0].float()       # batch row 0: [slots, head_dim]
        n = min(old.shape[0], cur.shape[0], rec.get("cache_len") or 0)
        changed = (cur[:n] != old[:n]).any(-1).nonzero().reshape(-1).tolist()
        moves = [[j, src] for j, src in zip(changed, sources(old, cur[changed]))]
        if moves:
            rec["slot_moves"] = moves

    def post(self, rec, call):
        logits = call.logits
        rows = rec.get("rows")
        if rows and isinstance(logits, torch.Tensor) and logits.dim() == 3 and is_tree(rec):
            c = cross(logits[0], rec.get("ids") or [])
            if c:
                rows["cross"] = c

    def finish(self, recording):
        recording["draft_shape"] = "tree" if any(map(is_tree, recording["forwards"])) else "chain"
