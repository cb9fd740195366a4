"""The speculative decoder: draft -> gate -> verify -> commit -> stop, one round at a time.

State is explicit (`_State`); every component the round uses (runners, draft processors, the
stopper, the commit step) is built once in `_build`, which is the only place faults plug in.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterator

import torch

from specdec_core.decoding import sampling
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.cycles import CycleDetector
from specdec_core.decoding.faults import FaultSet
from specdec_core.decoding.gates import build_gates
from specdec_core.analysis.metrics import compute_metrics
from specdec_core.decoding.stopping import StopChecker
from specdec_core.decoding.trace import RoundRecord, TokenRecord, TopK, Trace
from specdec_core.decoding.verifier import make_verifier
from specdec_core.decoding.vocab import TokenClasses

TOP_K = 5


class CacheInvariantError(AssertionError):
    pass


@dataclass
class Stop:
    reason: str          # eos | sentence | max_tokens | fault | ...
    hard: bool = False   # during drafting: end the run now, committing the block unverified


class IdStops:
    """The fixed stop rule: token ids only (EOS list, first sentence, max_new_tokens)."""

    def __init__(self, stop_ids, classes, cfg: DecodeConfig, prompt_len: int):
        sentence = classes.ids("sentence_end") if cfg.stop_at_first_sentence else None
        self.max_new_tokens = cfg.max_new_tokens
        self.checker = StopChecker(stop_ids, sentence, prompt_len, cfg.min_new_tokens,
                                   cfg.max_new_tokens)

    def check(self, n_gen: int, last_id: int, ids, stage: str) -> Stop | None:
        """ids() gives the whole sequence; only text-based (faulty) stoppers call it."""
        reason = self.checker.check(n_gen, last_id)
        return Stop(reason) if reason else None


@dataclass
class _State:
    full: list[int]                 # prompt + generated ids: what both models should have seen
    prompt_len: int
    buf: torch.Tensor               # [1, cap] the same ids, for logits processors
    trace: Trace
    cycles: CycleDetector
    round: int = 0
    ended_by: str = ""
    new_warnings: list = field(default_factory=list)

    @property
    def n_gen(self) -> int:
        return len(self.full) - self.prompt_len


class SpeculativeDecoder:
    def __init__(self, backend, cfg: DecodeConfig, trace: bool = True, debug: bool = False):
        self.backend, self.tokenizer = backend, backend.tokenizer
        self.faults = FaultSet(cfg.faults)
        self.cfg = self.faults.configure(cfg)
        self.detail = trace          # False: no per-token alternatives (benchmarks)
        self.debug = debug           # True: assert the cache invariant after every round
        self.classes = TokenClasses.for_tokenizer(self.tokenizer)
        self._text = _TextLookup(self.classes.texts)
        self.cancelled = False
        # Whether a drafted token's distribution is needed inside the draft loop (not only for
        # the trace): sampling picks, the entropy gate, cycle resampling.
        c = self.cfg
        self._need_p = (c.temperature > 0 or c.entropy_threshold is not None
                        or c.cycle_action == "resample")

    def cancel(self) -> None:
        self.cancelled = True

    # ------------------------------------------------------------------ components
    def _build(self, prompt_len: int) -> None:
        cfg, f, b = self.cfg, self.faults, self.backend
        self.edge = f.wrap_runner(b.make_runner(b.edge, "edge"), "edge")
        self.cloud = f.wrap_runner(b.make_runner(b.cloud, "cloud"), "cloud")
        self.processors = build_gates(cfg, self.tokenizer, start=prompt_len)
        self.processors.extend(f.draft_processors(self.classes))
        self.stopper = f.wrap_stopper(IdStops(self.backend.stop_ids, self.classes, cfg, prompt_len),
                                      self.tokenizer, prompt_len)
        self.commit = f.wrap_commit(self._commit)
        self.gen = torch.Generator().manual_seed(cfg.seed)
        self.verifier = make_verifier(self.cloud, cfg, self.gen)

    # ------------------------------------------------------------------ public API
    def stream(self, prompt, events: bool = True) -> Iterator[dict]:
        """Events as rounds complete (see docs/architecture.md); events=False yields only the
        final {"type": "done"} event."""
        cfg, t0 = self.cfg, time.perf_counter()
        ids = prompt.input_ids[0].tolist()
        self._build(len(ids))
        cap = len(ids) + cfg.max_new_tokens * 2 + cfg.k + 2
        buf = torch.zeros(1, cap, dtype=torch.long)
        buf[0, : len(ids)] = prompt.input_ids[0]
        trace = Trace(prompt_len=len(ids), config=cfg.to_dict(), backend=self.backend.name,
                      info=dict(prompt.info))
        st = _State(ids, len(ids), buf, trace, CycleDetector())
        self.edge.prefill(prompt)
        self.cloud.prefill(prompt)
        if events:
            yield {"type": "start", "prompt_len": len(ids), "info": trace.info}
        while not st.ended_by:
            if self.cancelled:
                st.ended_by = "cancelled"
                break
            n_tok, n_rej = len(trace.tokens), len(trace.rejected)
            self._round(st)
            if self.debug:
                self._check_invariant(st)
            if not events:
                continue
            yield {"type": "round", "round": trace.rounds[-1].to_dict(),
                   "tokens": [t.to_dict() for t in trace.tokens[n_tok:]],
                   "rejected": [t.to_dict() for t in trace.rejected[n_rej:]],
                   "warnings": st.new_warnings}
            st.new_warnings = []
        self._finish(st, time.perf_counter() - t0)
        yield {"type": "done", "trace": trace}

    def run(self, prompt) -> Trace:
        for ev in self.stream(prompt, events=False):
            pass
        return ev["trace"]

    # ------------------------------------------------------------------ the round
    def _round(self, st: _State) -> None:
        cfg, old = self.cfg, len(st.full)
        st.round += 1
        rnd = RoundRecord(st.round, start=len(st.trace.tokens), drafted=0, verified=False)
        t0 = time.perf_counter()

        # draft: up to k tokens from the edge; the gate decides on the cloud at the cadence
        block, rows, feed, window = [], [], st.full[self.edge.seen:], 0.0
        gate, procs = cfg.entropy_threshold, self.processors
        for j in range(cfg.k):
            raw = self.edge.feed(feed, last_only=True)[-1]
            logits = procs(st.buf[:, : old + j], raw[None])[0] if procs else raw
            if j == 0:
                self._maybe_check_cache(st, raw)
                self._check_draft_distribution(st, raw, logits)
            p = sampling.probs(logits, cfg.temperature) if self._need_p else None
            tok = sampling.pick(p, logits, cfg.temperature, self.gen)
            if cfg.cycle_action == "resample":
                tok = self._break_cycle(st, block, tok, logits)
            block.append(tok)
            rows.append(logits)
            if procs:
                st.buf[0, old + j] = tok
            if gate is not None:
                window = max(window, float(sampling.entropy(p)))
            feed = [tok]
            stop = self.stopper.check(st.n_gen + j + 1, tok, lambda: st.full + block, stage="draft")
            if stop:
                if stop.hard:           # ends the run now; the block is committed unverified
                    st.ended_by = stop.reason
                break
            if gate is not None and (j + 1) % cfg.cadence == 0 and j + 1 < cfg.k:
                if window > gate:       # mid-block check fired: stop drafting, ask the cloud
                    rnd.early_stop = True
                    break
                window = 0.0
        verify = gate is None or window > gate
        q, recs = self._draft_records(block, rows, st.round)
        rnd.drafted = len(block)
        rnd.max_entropy = max((r.entropy for r in recs if r.entropy is not None), default=None)
        rnd.draft_s = time.perf_counter() - t0

        # verify: one cloud call over what it has not seen yet plus the block
        if verify and not st.ended_by:
            t1 = time.perf_counter()
            v = self.verifier(st.full, block, q)
            rnd.verified, rnd.accepted, rnd.cloud_fed = True, v.accepted, v.fed
            rnd.bytes_up, rnd.bytes_down, rnd.link_s, rnd.request_s = v.cost.astuple()
            for r, rank, tp in zip(recs, v.ranks, v.target_probs):
                r.target_rank, r.target_prob, r.source = rank, tp, "accepted"
            fix = "corrected" if v.accepted < len(block) else "bonus"
            extra = TokenRecord(-1, v.next_token, self._text[v.next_token], fix, st.round,
                                target_prob=v.next_prob, target_rank=v.next_rank)
            self._reject(st, recs[v.accepted:], at=len(st.trace.tokens) + v.accepted)
            new = recs[: v.accepted] + [extra]
            rnd.verify_s = time.perf_counter() - t1
        else:
            new = recs
        rnd.committed = self.commit(st, new)

        # resync: both caches keep only what they saw of the new committed sequence
        for runner in (self.edge, self.cloud):
            runner.crop(min(_common_prefix(runner, st.full, old, block), len(st.full) - 1))
        st.trace.rounds.append(rnd)

    def _commit(self, st: _State, records: list[TokenRecord]) -> int:
        """Append tokens one by one, checking the stops and cycles after each."""
        n = 0
        for r in records:
            r.i = len(st.trace.tokens)
            st.buf[0, len(st.full)] = r.id
            st.full.append(r.id)
            st.trace.tokens.append(r)
            n += 1
            reason = "cycle" if self._track_cycle(st, r) else None
            if not reason:
                stop = self.stopper.check(st.n_gen, r.id, lambda: st.full, stage="commit")
                reason = stop and stop.reason
            if reason and not st.ended_by:  # a hard stop set earlier commits the whole block
                st.ended_by = reason
                break
        return n

    # ------------------------------------------------------------------ helpers
    def _draft_records(self, block: list[int], rows: list, rnd: int):
        """Records for a drafted block, computed once over the stacked rows (per-token tensor
        work in the loop is what tracing used to cost). Returns (q, records): q [n, V] is the
        distribution the drafts came from, needed by the sampling rule."""
        recs = [TokenRecord(-1, t, self._text[t], "draft", rnd) for t in block]
        if not (self.detail or self._need_p):
            return None, recs
        q = sampling.probs(torch.stack(rows), self.cfg.temperature)
        idx = torch.arange(len(block))
        ents = sampling.entropy(q).tolist()
        probs = q[idx, torch.tensor(block)].tolist()
        tops = torch.topk(q, TOP_K) if self.detail else None
        for n, r in enumerate(recs):
            r.entropy, r.draft_prob = ents[n], probs[n]
        if tops is not None:
            vals, ids = tops.values.tolist(), tops.indices.tolist()
            for r, vs, is_ in zip(recs, vals, ids):
                r.top = TopK(is_, vs, self._text)
        return q, recs

    def _reject(self, st: _State, recs: list[TokenRecord], at: int) -> None:
        for r in recs:
            r.source, r.at = "rejected", at
        st.trace.rejected.extend(recs)

    def _track_cycle(self, st: _State, r: TokenRecord) -> bool:
        """Mark cycle tokens; True when cycle_action=stop asks to end the run."""
        new = st.cycles.push(r.id)
        cur = st.cycles.current
        if cur is not None and cur.end == st.n_gen:   # the token extends a live cycle
            r.cycle = True
            if new is not None:
                for t in st.trace.tokens[cur.start: cur.end]:
                    t.cycle = True
                text = "".join(self._text[i] for i in new.pattern_ids)
                c = {"start": new.start, "end": new.end, "period": new.period, "text": text}
                st.trace.cycles.append(c)
                w = {"kind": "cycle", "message": f"cycle of period {new.period} at tokens "
                     f"{new.start}-{new.end - 1} ({text!r})", **c}
                st.trace.warnings.append(w)
                st.new_warnings.append(w)
                return self.cfg.cycle_action == "stop"
            st.trace.cycles[-1]["end"] = cur.end
        return False

    def _break_cycle(self, st: _State, block: list[int], tok: int, logits: torch.Tensor) -> int:
        """cycle_action=resample: a draft token that would continue a cycle is replaced by a
        top-k sample (seed 003's local fix) that excludes it."""
        tail = st.full[st.prompt_len:][-st.cycles.tail_needed:] + block
        if not st.cycles.would_extend(tail, tok):
            return tok
        alt = sampling.probs(logits, self.cfg.temperature)
        alt[tok] = 0.0
        vals, idx = torch.topk(alt, TOP_K)
        t = self.cfg.temperature or 0.8
        w = torch.softmax(torch.log(vals.clamp_min(1e-30)) / t, -1)
        new = int(idx[int(torch.multinomial(w, 1, generator=self.gen))])
        msg = (f"round {st.round}: draft token {self._text[tok]!r} would continue a cycle;"
               f" resampled {self._text[new]!r}")
        w_ = {"kind": "cycle_resample", "message": msg, "at": st.n_gen + len(block)}
        st.trace.warnings.append(w_)
        st.new_warnings.append(w_)
        return new

    def _check_draft_distribution(self, st: _State, raw: torch.Tensor, logits: torch.Tensor) -> None:
        """With no gates declared, the draft must sample from the edge's own distribution at the
        configured temperature; a gap means hidden logits processing in the draft path."""
        if not self.detail or self.cfg.has_gates:
            return
        if logits is raw:
            return
        t = self.cfg.temperature
        tv = 0.5 * float((sampling.probs(raw, t) - sampling.probs(logits, t)).abs().sum())
        if tv > 0.05:
            w = {"kind": "draft_distorted", "round": st.round, "tv": round(tv, 4),
                 "message": f"round {st.round}: the draft distribution differs from the edge "
                            f"model's own by total variation {tv:.2f} although no gate is on"}
            st.trace.warnings.append(w)
            if sum(x["kind"] == "draft_distorted" for x in st.trace.warnings) == 1:
                st.new_warnings.append(w)   # one toast per run is enough

    def _maybe_check_cache(self, st: _State, cached: torch.Tensor) -> None:
        n = self.cfg.cache_check_every
        if not n or st.round % n or st.n_gen == 0:
            return
        fresh = self.edge.recompute_last(st.full[st.prompt_len:])
        diff = float((fresh - cached).abs().max())
        tol = 1e-3 + 2e-2 * float(fresh.abs().max())
        if diff > tol:
            w = {"kind": "cache_desync", "round": st.round, "max_abs_diff": round(diff, 4),
                 "message": f"round {st.round}: edge logits from its KV cache differ from a "
                            f"cache-free recompute by {diff:.3g} (tolerance {tol:.2g})"}
            st.trace.warnings.append(w)
            st.new_warnings.append(w)

    def _check_invariant(self, st: _State) -> None:
        for name, r in (("edge", self.edge), ("cloud", self.cloud)):
            if r.cache_len() != r.seen:
                raise CacheInvariantError(f"{name}: cache holds {r.cache_len()} positions, runner saw {r.seen}")
            if r.seen > len(st.full) - 1 and not st.ended_by:
                raise CacheInvariantError(f"{name}: saw {r.seen} > committed {len(st.full)} - 1")
            if r.history != st.full[: r.seen]:
                raise CacheInvariantError(f"{name}: cache holds tokens that are not committed")

    def _finish(self, st: _State, wall: float) -> None:
        tr = st.trace
        tr.ended_by = st.ended_by
        tr.text = self.tokenizer.decode(tr.token_ids, skip_special_tokens=True)
        tr.metrics = compute_metrics(tr, wall, self.edge.forwards, self.cloud.forwards)
        from specdec_core.analysis.diagnostics import diagnose  # diagnostics reads metrics; import late to stay light

        tr.diagnostics = diagnose(tr)


class _TextLookup:
    """Token text by id; ids past the tokenizer (padded model vocabularies) show as <id>."""

    def __init__(self, texts):
        self.texts = texts

    def __getitem__(self, i: int) -> str:
        return self.texts[i] if 0 <= i < len(self.texts) else f"<{i}>"


def _common_prefix(runner, full: list[int], old: int, block: list[int]) -> int:
    """How much of what `runner` has seen is still a prefix of the committed sequence."""
    seen = runner.seen
    if seen <= old:
        return seen
    n = old
    for a, b in zip(block[: seen - old], full[old:]):
        if a != b:
            break
        n += 1
    return n
