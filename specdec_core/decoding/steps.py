"""The speculative round as composed steps: draft -> verify -> commit -> resync.
`play_round` at the bottom is the whole algorithm. Faults swap `run.verify` / `run.commit` (and
the runners, processors and stopper inside the Run), never a line here."""
from __future__ import annotations

import time
from dataclasses import astuple, dataclass, field

import torch

from specdec_core.analysis.divergence import common_prefix
from specdec_core.decoding import checks, sampling
from specdec_core.decoding.stopping import Stop
from specdec_core.decoding.trace import RoundRecord, TokenRecord, TopK
from specdec_core.slots import pass_turn

TOP_K = 5


@dataclass
class Draft:
    block: list[int]                          # drafted ids
    rows: list = field(default_factory=list)  # the (processed) logits each was drawn from
    why: str = "k"           # k: full block | gate: entropy gate fired mid-block |
                             # stop: the stopper fired | interrupt: cancelled or out of time
    stop: Stop | None = None
    ask_cloud: bool = True   # False: the entropy gate says the edge may commit on its own


def draft(run) -> Draft:
    """Up to k tokens from the edge; at the gate cadence the entropy gate may cut the block."""
    cfg, seq, gate, procs = run.cfg, run.seq, run.gate, run.processors   # gate: nats
    d, window, feed = Draft([]), 0.0, seq.ids[run.edge.seen:]
    for j in range(cfg.k):
        if (stop := run.interrupted()) is not None:
            d.why, d.stop = "interrupt", stop
            return d
        pass_turn()          # a shared server's decode slot to a run in line (specdec_core/slots.py)
        raw = run.edge.feed(feed, last_only=True)[-1]
        logits = procs(seq.tensor(), raw[None])[0] if procs else raw
        if j == 0:
            checks.cache_agrees(run, raw)
        p = sampling.probs(logits, cfg.temperature) if run.need_p else None
        tok = sampling.pick(p, logits, cfg.temperature, run.gen)
        if cfg.cycle_action == "resample":
            tok = break_cycle(run, d.block, tok, logits)
        seq.push(tok)
        d.block.append(tok)
        d.rows.append(logits)
        feed = [tok]
        if gate is not None:
            window = max(window, float(sampling.entropy(p)))
        if (stop := run.stopper(seq)) is not None:
            d.why, d.stop = "stop", stop
            break
        if gate is not None and (j + 1) % cfg.cadence == 0 and j + 1 < cfg.k:
            if window > gate:          # mid-block check fired: stop drafting, ask the cloud
                d.why = "gate"
                break
            window = 0.0
    d.ask_cloud = gate is None or window > gate
    return d


def draft_records(run, d: Draft) -> tuple[torch.Tensor | None, list[TokenRecord]]:
    """Records for a drafted block, computed once over the stacked rows (per-token tensor work
    in the loop is what tracing used to cost). Returns (q, records): q [n, V] is the
    distribution the drafts came from, needed by the sampling rule."""
    who = run.cfg.drafter
    recs = [TokenRecord(-1, t, run.text[t], "draft", run.round, drafter=who) for t in d.block]
    if not (run.detail or run.need_p) or not d.block:
        return None, recs
    q = sampling.probs(torch.stack(d.rows), run.cfg.temperature)
    ents = sampling.entropy(q).tolist()
    probs = q[torch.arange(len(d.block)), torch.tensor(d.block)].tolist()
    for r, e, pr in zip(recs, ents, probs):
        r.entropy, r.draft_prob = e, pr
    if run.detail:
        tops = torch.topk(q, min(TOP_K, q.shape[-1]))
        for r, vs, is_ in zip(recs, tops.values.tolist(), tops.indices.tolist()):
            r.top = TopK(is_, vs, run.text)
    return q, recs


def verify(run, d: Draft, q):
    """One cloud call over what it has not seen yet plus the block, and the acceptance rule
    (decoding/verifier.py: a local forward on the logits, or one request to a remote cloud)."""
    checks.q_matches_draft(run, d, q)                   # the q the rule gets (issue 35)
    committed = run.seq.ids[: len(run.seq)]            # the drafted block sits past the mark
    return run.verifier(committed, d.block, q)


def judge(run, recs: list[TokenRecord], v: sampling.Verdict) -> list[TokenRecord]:
    """The verdict applied to the records: accepted ones get the cloud's opinion, rejected ones
    go to trace.rejected, and the correction or bonus token is appended."""
    for r, rank, tp in zip(recs, v.ranks, v.target_probs):
        r.target_rank, r.target_prob, r.source = rank, tp, "accepted"
    at = len(run.trace.tokens) + v.accepted
    for r in recs[v.accepted:]:
        r.source, r.at = "rejected", at
    run.trace.rejected.extend(recs[v.accepted:])
    fix = "corrected" if v.accepted < len(recs) else "bonus"
    extra = TokenRecord(-1, v.next_token, run.text[v.next_token], fix, run.round,
                        target_prob=v.next_prob, target_rank=v.next_rank)
    out = recs[: v.accepted] + [extra]
    for r, t2 in zip(out, v.top2 or ()):
        r.cloud_top2 = t2
    return out


def commit(run, records: list[TokenRecord]) -> int:
    """Replace the drafted tail by `records`, one token at a time, checking cycles and stops
    after each; the first stop ends the run there."""
    run.seq.rollback()
    for n, r in enumerate(records, 1):
        run.record(r)
        stop = track_cycle(run, r) or run.stopper(run.seq)
        if stop:
            run.end(stop)
            return n
    return len(records)


def resync(run, old: int, block: list[int]) -> None:
    """Both caches keep only what they saw of the new committed sequence: of what a runner
    has seen (old committed ids, then drafts), what is still a prefix of it."""
    full = run.seq.ids
    for r in (run.edge, run.cloud):
        kept = r.seen if r.seen <= old else old + common_prefix(block[: r.seen - old], full[old:])
        r.crop(min(kept, len(full) - 1))


def play_round(run) -> RoundRecord | None:
    """One round. None when cancelled or out of time while drafting (the block is dropped)."""
    run.round += 1
    old, t0 = len(run.seq), time.perf_counter()
    d = draft(run)
    if d.why == "interrupt":
        run.end(d.stop)
        run.seq.rollback()
        resync(run, old, d.block)
        return None
    q, recs = draft_records(run, d)
    rnd = RoundRecord(run.round, start=len(run.trace.tokens), drafted=len(d.block), verified=False,
                      early_stop=d.why == "gate", draft_s=time.perf_counter() - t0,
                      max_entropy=max((r.entropy for r in recs if r.entropy is not None), default=None))
    if d.ask_cloud:
        t1 = time.perf_counter()
        v = run.verify(run, d, q)            # None: a fault ended the run before the cloud looked
        if v is not None:
            recs = judge(run, recs, v)
            rnd.verified, rnd.accepted, rnd.cloud_fed = True, v.accepted, v.cloud_fed
            rnd.bytes_up, rnd.bytes_down, rnd.link_s, rnd.request_s = astuple(v.cost)
            rnd.verify_s = time.perf_counter() - t1
    rnd.committed = run.commit(run, recs)
    resync(run, old, d.block)
    run.trace.rounds.append(rnd)
    return rnd


# --- cycles ----------------------------------------------------------------------------------
def track_cycle(run, r: TokenRecord) -> Stop | None:
    """Mark cycle tokens and warn on a new cycle; Stop.CYCLE when cycle_action=stop."""
    new = run.cycles.push(r.id)
    cur = run.cycles.current
    if cur is None or cur.end != run.seq.n_gen:   # the token does not extend a live cycle
        return None
    r.cycle = True
    if new is None:
        run.trace.cycles[-1]["end"] = cur.end
        return None
    for t in run.trace.tokens[cur.start: cur.end]:
        t.cycle = True
    w = new.warning("".join(run.text[i] for i in new.pattern_ids))
    run.trace.cycles.append({k: w[k] for k in ("start", "end", "period", "text")})
    run.warn(w)
    return Stop.CYCLE if run.cfg.cycle_action == "stop" else None


def break_cycle(run, block: list[int], tok: int, logits: torch.Tensor) -> int:
    """cycle_action=resample: a draft token that would continue a cycle is replaced by a top-k
    sample (seed 003's local fix) that excludes it."""
    if not run.cycles.would_extend(run.seq.tail(run.cycles.tail_needed + len(block)), tok):
        return tok
    alt = sampling.probs(logits, run.cfg.temperature)
    alt[tok] = 0.0
    vals, idx = torch.topk(alt, TOP_K)
    w = torch.softmax(torch.log(vals.clamp_min(1e-30)) / (run.cfg.temperature or 0.8), -1)
    new = int(idx[sampling.draw(w, run.gen)])
    run.warn({"kind": "cycle_resample", "at": run.seq.n_gen,
              "message": f"round {run.round}: draft token {run.text[tok]!r} would continue a "
                         f"cycle; resampled {run.text[new]!r}"})
    return new
