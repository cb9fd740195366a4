"""Reconstruction, step 3: the trace in the existing schema (docs/architecture.md), so every
view (token view, plots, cards, A/B) renders a recorded run."""
from __future__ import annotations

import math

from specdec_core.analysis.metrics import compute_metrics
from specdec_core.decoding.cycles import CycleDetector
from specdec_core.decoding.trace import RoundRecord, TokenRecord, Trace
from specdec_core.recorder.evidence import timing
from specdec_core.recorder.evidence.rounds import Round
from specdec_core.recorder.evidence.tape import Tapes


class Texts:
    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.cache: dict = {}

    def __call__(self, i) -> str:
        if i is None:
            return "?"
        if i not in self.cache:
            try:
                self.cache[i] = self.tok.decode([i]) if self.tok is not None else f"<{i}>"
            except Exception:
                self.cache[i] = f"<{i}>"
        return self.cache[i]


def ended_by(rec: dict) -> str:
    out, d = rec["out_ids"], rec.get("declared", {})
    if not out:
        return "empty"
    stops, limit = set(rec.get("stop_ids") or []), d.get("max_new_tokens")
    if limit and len(out) >= limit and any(x in stops for x in out[:-1]):
        return "max_tokens"      # it ran past a stop id to the limit: the last one is chance
    if out[-1] in stops:
        return "eos"
    if out[-1] in set(d.get("sentence_ids") or []) and len(out) >= d.get("min_new_tokens", 0):
        return "sentence"
    if limit and len(out) >= limit:
        return "max_tokens"
    return "stopped"


def _config(declared: dict) -> dict:
    from specdec_core.decoding.config import DecodeConfig

    known = {k: v for k, v in declared.items() if k in DecodeConfig.__dataclass_fields__}
    try:
        cfg = DecodeConfig(**known).to_dict()
    except Exception:
        cfg = dict(known)
    cfg.update({"recorded": True, "declared": dict(declared)})
    return cfg


def _prob(f, r: int, token: int) -> float | None:
    lp = f.logp_of(r, token)
    return round(math.exp(lp), 5) if lp is not None else None


def _edge_info(tr: TokenRecord, rnd: Round, p: int, texts) -> None:
    got = rnd.drafted_by.get(p)
    if got:
        f, r = got
        tr.entropy, tr.draft_prob, tr.top = f.rows["entropy"][r], _prob(f, r, tr.id), f.top(r, texts)


def _cloud_info(tr: TokenRecord, f, r) -> None:
    tr.target_rank, tr.target_prob = f.rank_of(r, tr.id), _prob(f, r, tr.id)


def build_trace(rec: dict, t: Tapes, rounds: list[Round], tokenizer, info=None) -> Trace:
    texts = Texts(tokenizer)
    C, P = t.C, t.P
    fw = {f.i: f for f in t.fwds}
    tr = Trace(prompt_len=P, config=_config(rec.get("declared", {})),
               backend=rec.get("backend", "recorded"), info=dict(info or {}))
    tr.config["drafter"] = rec.get("drafter")       # model / lookup / self / head (recorder/observe/depth.py)
    who = {"model": "edge"}.get(rec.get("drafter"), rec.get("drafter"))   # each draft's drafter
    for rnd, times in zip(rounds, timing.round_times(rec, rounds)):
        rr = RoundRecord(rnd.n, start=len(tr.tokens), drafted=0, verified=rnd.verified, **times)
        for p in range(rnd.start, rnd.end):
            src = "accepted" if rnd.verified else "draft"
            if rnd.verified and p == rnd.extra:      # (extra >= block_start)
                src = "corrected" if rnd.accepted < len(rnd.block) else "bonus"
            tok = TokenRecord(len(tr.tokens), C[p], texts(C[p]), src, rnd.n,
                              drafter=who if src in ("accepted", "draft") else None)
            if src in ("accepted", "draft"):
                _edge_info(tok, rnd, p, texts)
            if p in t.decided:
                fi, r = t.decided[p]
                _cloud_info(tok, fw[fi], r)
            tr.tokens.append(tok)
        if rnd.verified:
            f = rnd.cloud
            at = (rnd.extra - P) if rnd.extra is not None else len(tr.tokens)
            for p in range(rnd.block_start + rnd.accepted, len(f.ctx)):
                rej = TokenRecord(-1, f.ctx[p], texts(f.ctx[p]), "rejected", rnd.n, at=at, drafter=who)
                _edge_info(rej, rnd, p, texts)
                r = f.row_at(p - 1)
                if r is not None:
                    _cloud_info(rej, f, r)
                tr.rejected.append(rej)
            rr.drafted, rr.accepted = len(rnd.block), rnd.accepted
            rr.cloud_fed = f.n
        else:
            rr.drafted = rnd.end - rnd.start
        rr.committed = len(tr.tokens) - rr.start
        ents = [x.entropy for x in tr.tokens[rr.start:] if x.entropy is not None]
        rr.max_entropy = max(ents) if ents else None
        tr.rounds.append(rr)
    _cycles(tr, texts)
    tr.ended_by = ended_by(rec)
    tr.text = tokenizer.decode(tr.token_ids, skip_special_tokens=True) if tokenizer else ""
    n_edge = sum(f.model == "edge" for f in t.fwds)
    tr.metrics = compute_metrics(tr, rec.get("wall_s") or 0.0, n_edge, len(t.fwds) - n_edge)
    tr.metrics["time_split"] = timing.recording_split(rec)   # None: recorded without timings
    after = [f.i for f in t.fwds if f.model == "cloud" and f.rows and f.match >= len(C) and f.first_q >= len(C) - 1]
    if after and len(C) > P:    # rounds = verify forwards but these (result.identities)
        tr.metrics["rounds_differ"] = {"forwards": after, "why": (
            f"cloud forward(s) {', '.join(map(str, after))} ran after the output was complete (fed all of it, "
            "scoring only past its end: a batch's other rows still decoding): they verify none of it")}
    return tr


def _cycles(tr: Trace, texts) -> None:
    for c in CycleDetector().detect(tr.token_ids):
        w = c.warning("".join(texts(i) for i in c.pattern_ids))
        tr.cycles.append({k: w[k] for k in ("start", "end", "period", "text")})
        for x in tr.tokens[c.start:c.end]:
            x.cycle = True
        tr.warnings.append(w)
