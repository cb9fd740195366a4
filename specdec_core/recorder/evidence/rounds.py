"""Reconstruction, step 2: rounds (edge drafting runs between cloud verifications) and, for
every committed token, where it came from (docs/recorder.md, "Reconstruction")."""
from __future__ import annotations

from dataclasses import dataclass, field

from specdec_core.recorder.evidence.resumed import resumed
from specdec_core.recorder.evidence.tape import BUILDS, Fwd, Tapes, decide


@dataclass
class Round:
    n: int
    edge: list[Fwd] = field(default_factory=list)      # the drafting run
    cloud: Fwd | None = None                           # the verifying forward (None: unverified)
    start: int = 0                                     # frontier K before (position in C)
    block_start: int = 0                               # first drafted position
    block: list = field(default_factory=list)          # drafted ids (as fed to the cloud)
    accepted: int = 0
    extra: int | None = None                           # position of the correction/bonus
    end: int = 0                                       # frontier after
    drafted_by: dict = field(default_factory=dict)     # position -> (edge Fwd, row)
    misaligned: bool = False    # a verify with one row per draft, none before the block (issue 56)

    @property
    def verified(self) -> bool:
        return self.cloud is not None

    @property
    def is_tree(self) -> bool:
        """A tree verify round (its slots resolved by recorder/normalize/tree.py)."""
        return self.verified and self.cloud.raw.get("tree_sel") is not None


def _draft_rows(edge_fwds: list[Fwd]) -> dict:
    """position p -> (forward, row) of the latest edge row that scored p-1 (i.e. drafted p)."""
    out, checks = {}, {}
    for f in edge_fwds:     # cache-free forwards are consistency checks unless nothing else
        dst = out if f.raw.get("cache") is not None else checks   # scored that position
        for q in f.row_positions():
            dst[q + 1] = (f, q - f.first_q)
    return {**checks, **out}


def _fed_on(ids: list, fwds: list[Fwd]) -> bool:
    """`ids` were fed, in a row, to these forwards."""
    fed = [x for g in fwds for x in g.raw.get("ids") or []]
    return any(fed[i:i + len(ids)] == ids for i in range(len(fed) - len(ids) + 1))


def _block_start(f: Fwd, K: int, edge: list[Fwd], past: dict, short: bool) -> tuple[int, dict, dict]:
    """(first drafted position, position -> drafting (forward, row), this round's rows) of verify f."""
    mine, block = _draft_rows(edge), range(K, len(f.ctx))
    drafted = mine if not edge or any(p in mine for p in block) else {   # this round's rows all past
        p: past[p] for p in block if p in past and past[p][0].ctx[:p] == f.ctx[:p]}   # the block:
    # it was drafted in an earlier round on the verified context (a pipelined edge drafts ahead)
    s = len(f.ctx)
    if not edge:                 # no drafting forward (prompt lookup, n-grams): every id
        s = max(K, min(s, f.first_q + 1))   # past the frontier that a row scored is a draft
    if f.raw.get("tree_block") is not None:     # a tree's path (recorder/normalize/tree.py): its
        s = max(K, f.raw["tree_block"])           # drafts start at the tree's first level
    while s - 1 >= K and s - 1 in drafted and (f.row_at(s - 2) is not None or short and s - 1 == K):
        s -= 1
    if s - 1 > K and not any(p in drafted for p in range(K, s)) and _fed_on(f.ctx[K:s - 1], edge[1:]):
        s = K    # ids the drafting chain was fed after its first forward, at no row's position:
        # drafts from a cache whose positions run ahead (a never-cropped drafter cache)
    return s, drafted, mine


def build_rounds(t: Tapes) -> list[Round]:
    """The rounds; under a declared temperature also where the loop resumed (t.resumed, and
    t.decided without the rows past it: evidence/resumed.py)."""
    BUILDS["rounds"] += 1
    C, K = t.C, t.P
    where = {f.i: k for k, f in enumerate(t.fwds)}
    cached_edge = any(f.model == "edge" and f.raw.get("cache") is not None for f in t.fwds)
    rounds: list[Round] = []
    past: dict = {}          # position -> (edge forward, row) of earlier rounds' drafting rows
    cur = Round(1, start=K)
    for f in t.fwds:
        if f.model == "edge":
            cur.edge.append(f)
            continue
        # one row per draft and none before them (logits_to_keep one short): a misaligned verify
        short = bool(f.rows) and f.first_q == K < len(f.ctx) == K + len(f.rows["argmax"]) and f.match >= K
        if not f.rows or f.match < K or (f.row_at(K - 1) is None and not short) or len(f.ctx) <= K - 1:
            continue                                 # a prefill or a stray call: not a verification
        s, drafted, mine = _block_start(f, K, cur.edge, past, short)
        a = 0
        while (s + a < len(f.ctx) and s + a < len(C) and f.ctx[s + a] == C[s + a]):
            a += 1
        cur.cloud, cur.start, cur.block_start = f, K, s
        cur.misaligned = short and s == K
        cur.block, cur.accepted = list(f.ctx[s:]), a
        cut = resumed(t, cur, where[f.i], cached_edge) if t.temperature > 0 else None
        if cut is not None:          # the loop's correction repeated the draft (resumed.py)
            t.resumed[f.i] = cut
            a = cur.accepted = cut - s
        cur.drafted_by = {p: drafted[p] for p in range(s, len(f.ctx)) if p in drafted}
        nxt = s + a
        cur.extra = nxt if nxt < len(C) else None
        cur.end = min(nxt + 1, len(C))
        rounds.append(cur)
        past.update(mine)
        K = cur.end
        cur = Round(len(rounds) + 1, start=K)
        if K >= len(C):
            break
    if t.resumed:
        decide(t)
    if K < len(C) or cur.edge:
        cur.drafted_by = _draft_rows(cur.edge)
        cur.block_start, cur.block = K, list(C[K:])
        cur.end = len(C)
        if cur.edge or cur.block:
            rounds.append(cur)
    return rounds
