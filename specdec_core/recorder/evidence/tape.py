"""Reconstruction, step 1: per cache, the tape of what it held at every forward
(docs/recorder.md, "Reconstruction")."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from specdec_core.analysis.divergence import common_prefix
from specdec_core.errors import UserError
from specdec_core.recorder.observe.hooks import SCHEMA


class RecordingError(UserError):
    pass


@dataclass
class Fwd:
    """One forward, reconstructed."""
    i: int
    model: str
    raw: dict
    L: int                      # cache length before the call (0 without a cache)
    ctx: list                   # the whole context: tape[:L] + input ids (None = unknown)
    writers: list               # forward index that wrote each context position (-1 unknown)
    match: int                  # len of the common prefix of ctx and C
    rows: dict | None           # raw rows
    first_q: int = 0            # position scored by row 0

    @property
    def n(self) -> int:
        return len(self.raw.get("ids") or [])

    def row_at(self, q: int) -> int | None:
        """Index of the row that scored position q (predicting q+1), or None."""
        if not self.rows:
            return None
        r = q - self.first_q
        return r if 0 <= r < len(self.rows["argmax"]) else None

    def row_positions(self) -> range:
        return range(self.first_q, self.first_q + (len(self.rows["argmax"]) if self.rows else 0))

    def rank_of(self, r: int, token: int) -> int | None:
        """Rank of `token` under row r, from what the recorder kept (None: not known, > 5)."""
        rows, q = self.rows, self.first_q + r
        if q + 1 < len(self.ctx) and self.ctx[q + 1] == token and r < len(rows["next_rank"]):
            return rows["next_rank"][r]
        fed = rows.get("fed_next")
        if fed and r == len(rows["argmax"]) - 1 and fed["token"] == token:
            return fed["rank"]
        if token in rows["top_ids"][r]:
            return rows["top_ids"][r].index(token) + 1
        return None

    def logp_of(self, r: int, token: int) -> float | None:
        rows, q = self.rows, self.first_q + r
        if q + 1 < len(self.ctx) and self.ctx[q + 1] == token and r < len(rows["next_logp"]):
            return rows["next_logp"][r]
        fed = rows.get("fed_next")
        if fed and r == len(rows["argmax"]) - 1 and fed["token"] == token:
            return fed["logp"]
        if token in rows["top_ids"][r]:
            return rows["top_logp"][r][rows["top_ids"][r].index(token)]
        return None

    def top(self, r: int, texts) -> list[dict]:
        rows = self.rows
        return [{"id": i, "text": texts(i), "prob": round(math.exp(lp), 5)}
                for i, lp in zip(rows["top_ids"][r], rows["top_logp"][r])]


@dataclass
class Tapes:
    prompt: list[int]
    out: list[int]
    fwds: list[Fwd] = field(default_factory=list)
    decided: dict = field(default_factory=dict)   # position -> (forward, row) of first cloud decision
    # a drafter's own prompt where it differs from the cloud's at the same length (an edge fed
    # the prompt without the audio condition): its prompt positions are judged against it
    own_prompt: dict = field(default_factory=dict)

    def ref(self, model: str) -> list:
        """The sequence `model` should read: its own prompt (if any), then the committed output."""
        own = self.own_prompt.get(model)
        return own + self.out if own else self.C

    @property
    def C(self) -> list[int]:
        return self.prompt + self.out

    @property
    def P(self) -> int:
        return len(self.prompt)


def build_tapes(rec: dict) -> Tapes:
    if not isinstance(rec, dict) or rec.get("schema") != SCHEMA:
        raise RecordingError(f"not a SpecScope recording (expected schema {SCHEMA!r})")
    t = Tapes(list(rec["prompt_ids"] or []), list(rec["out_ids"] or []))
    C = t.C
    tapes: dict = {}
    for raw in rec["forwards"]:
        ids = list(raw.get("ids") or [])
        key = (raw["model"], raw.get("cache"))
        L = raw.get("cache_len") or 0
        old_ctx, old_w = tapes.get(key, ([], [])) if raw.get("cache") is not None else ([], [])
        src = raw.get("tape_src")           # slots the loop moved (a batch row realigned)
        if src is not None:
            old_ctx = [old_ctx[s] if 0 <= s < len(old_ctx) else None for s in src]
            old_w = [old_w[s] if 0 <= s < len(old_w) else -1 for s in src]
        if L <= len(old_ctx):
            ctx, w = old_ctx[:L], old_w[:L]
        else:                    # the cache holds what this recording never saw being written
            ctx, w = old_ctx + [None] * (L - len(old_ctx)), old_w + [-1] * (L - len(old_ctx))
        ctx, w = ctx + ids, w + [raw["i"]] * len(ids)
        if raw.get("cache") is not None and raw.get("use_cache") is not False:
            tapes[key] = (ctx, w)
        if L == 0 and raw["model"] != "cloud" and raw["model"] not in t.own_prompt and len(ids) >= t.P:
            t.own_prompt[raw["model"]] = ids[:t.P] if ids[:t.P] != t.prompt else None
        rows = raw.get("rows")
        f = Fwd(raw["i"], raw["model"], raw, L, ctx, w, common_prefix(ctx, t.ref(raw["model"])), rows)
        if rows:
            f.first_q = L + rows["offset"]
        t.fwds.append(f)
        if f.model == "cloud" and rows:
            cut = raw.get("resumed_at", math.inf)   # rows past the loop's own correction (resumed.py)
            for q in f.row_positions():
                if q + 1 <= f.match and q + 1 >= t.P and q + 1 < len(C) + 1 and q < cut:
                    t.decided.setdefault(q + 1, (f.i, q - f.first_q))
    return t
