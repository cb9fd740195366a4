"""The forwards replayed per cache (what each cache held at every forward, before it is read
against the committed sequence: evidence/tape.py), and the types the normalizers and the
evidence share: Fwd, Tapes, RecordingError."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from specdec_core.errors import UserError


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
        return self._kept(r, token, "rank")

    def logp_of(self, r: int, token: int) -> float | None:
        return self._kept(r, token, "logp")

    def _kept(self, r: int, token: int, key: str):
        """`token`'s "rank" or "logp" under row r: the next fed id's, the next forward's first
        fed id's (fed_next), else the top-5's (None: not kept)."""
        rows, q = self.rows, self.first_q + r
        if q + 1 < len(self.ctx) and self.ctx[q + 1] == token and r < len(rows["next_" + key]):
            return rows["next_" + key][r]
        fed = rows.get("fed_next")
        if fed and r == len(rows["argmax"]) - 1 and fed["token"] == token:
            return fed[key]
        if token in rows["top_ids"][r]:
            k = rows["top_ids"][r].index(token)
            return k + 1 if key == "rank" else rows["top_logp"][r][k]
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
    temperature: float = 0.0     # declared (> 0: where the loop resumed is read, resumed.py)
    resumed: dict = field(default_factory=dict)   # verify forward -> where the loop resumed

    def ref(self, model: str) -> list:
        """The sequence `model` should read: its own prompt (if any), then the committed output."""
        own = self.own_prompt.get(model)
        return own + self.out if own else self.C

    @property
    def C(self) -> list[int]:
        return self.prompt + self.out

    def decisions(self) -> list[tuple]:
        """(position, cloud Fwd, row) of every output position a cloud row decided, in order."""
        fw = {f.i: f for f in self.fwds}
        return [(p, fw[self.decided[p][0]], self.decided[p][1]) for p in range(self.P, len(self.C))
                if p in self.decided]

    def not_argmax(self) -> list[tuple]:
        """decisions() where the committed token is not the deciding row's argmax."""
        return [(p, f, r) for p, f, r in self.decisions() if f.rows["argmax"][r] != self.C[p]]

    @property
    def P(self) -> int:
        return len(self.prompt)


def replay(forwards: list) -> list[Fwd]:
    """Per cache, what it held at every forward: each forward's whole context and who wrote each
    position (not yet read against the committed sequence: `bind`)."""
    BUILDS["replays"] += 1
    tapes: dict = {}
    out = []
    for raw in forwards:
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
        rows = raw.get("rows")
        f = Fwd(raw["i"], raw["model"], raw, L, ctx, w, 0, rows)
        if rows:
            f.first_q = L + rows["offset"]
        out.append(f)
    return out


BUILDS: Counter = Counter()     # replays, tapes and rounds built (a test counts them per analysis)
