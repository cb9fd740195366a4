"""The speculative decoder: builds one Run per decode and plays rounds until a stop.
The round is `steps.play_round`; components are built in `_start`, the only place faults plug in."""
from __future__ import annotations

import threading
import time
from typing import Iterator

import torch

from specdec_core.analysis.metrics import compute_metrics, time_split
from specdec_core.decoding import checks, steps, tree_round
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.dependence import audio_dependence
from specdec_core.decoding.device_time import round_device_s
from specdec_core.decoding.engine import apply_engine
from specdec_core.decoding.faults import FaultSet
from specdec_core.decoding.gates import build_gates
from specdec_core.decoding.runner import ModelRunner
from specdec_core.decoding.head import head_runners
from specdec_core.decoding.run import Run, TextLookup, TokenSeq, logits_width
from specdec_core.decoding.stopping import build_stopper
from specdec_core.decoding.trace import Trace
from specdec_core.decoding.verifier import make_verifier
from specdec_core.decoding.vocab import TokenClasses


class SpeculativeDecoder:
    def __init__(self, backend, cfg: DecodeConfig, trace: bool = True, debug: bool = False,
                 cancel: threading.Event | None = None, dependence: bool = True):
        self.backend, self.tokenizer = backend, backend.tokenizer
        self.faults = FaultSet(cfg.faults)
        self.declared = cfg          # the knobs as set: what the trace's config says
        self.cfg = self.faults.configure(cfg)   # what the (possibly faulty) code runs with
        self.detail = trace          # False: no per-token alternatives (benchmarks)
        self.dependence = dependence and trace   # the audio-dependence forward after the decode
        self.debug = debug           # True: assert the cache invariant after every round
        self.classes = TokenClasses.for_tokenizer(self.tokenizer)
        self.cancel_event = cancel or threading.Event()

    def cancel(self) -> None:
        """Stop the running decode within one round (from any thread)."""
        self.cancel_event.set()

    def stream(self, prompt, events: bool = True, cancel: threading.Event | None = None) -> Iterator[dict]:
        """Events as rounds complete (see docs/architecture.md); events=False yields only the
        final {"type": "done"} event. `cancel` (or decoder.cancel()) ends the run within one
        round with ended_by="cancelled"; cfg.time_limit_s ends it with "time_limit"."""
        t0 = time.perf_counter()
        run = self._start(prompt, cancel or self.cancel_event, t0)
        caller = 0.0        # time the caller held the stream between events (e.g. UI rendering)
        if events:
            t = time.perf_counter()
            yield {"type": "start", "prompt_len": run.seq.prompt_len, "info": run.trace.info}
            caller += time.perf_counter() - t
        play = steps.play_round if run.cfg.draft_tree == "chain" else tree_round.play_round
        while not run.ended_by:
            if (stop := run.interrupted()) is not None:
                run.end(stop)
                break
            n_tok, n_rej = len(run.trace.tokens), len(run.trace.rejected)
            t, e, c = time.perf_counter(), _busy(run.edge), _busy(run.cloud)
            with torch.inference_mode():     # once per round, not per forward
                rnd = play(run)
            if rnd is not None:
                rnd.round_s = time.perf_counter() - t
                rnd.edge_s, rnd.cloud_s = _busy(run.edge) - e, _busy(run.cloud) - c
                rnd.device_s = round_device_s(run.edge, run.cloud)
            if self.debug:
                checks.cache_invariant(run)
            if events and rnd is not None:
                ev = {"type": "round", "round": rnd.to_dict(),
                      "tokens": [t.to_dict() for t in run.trace.tokens[n_tok:]],
                      "rejected": [t.to_dict() for t in run.trace.rejected[n_rej:]],
                      "warnings": run.take_warnings()}
                t = time.perf_counter()
                yield ev
                caller += time.perf_counter() - t
        yield {"type": "done", "trace": self._finish(run, time.perf_counter() - t0, caller, prompt)}

    def run(self, prompt, cancel: threading.Event | None = None) -> Trace:
        for ev in self.stream(prompt, events=False, cancel=cancel):
            pass
        return ev["trace"]

    def _start(self, prompt, cancel: threading.Event, t0: float) -> Run:
        cfg, f, b = self.cfg, self.faults, self.backend
        seq = TokenSeq(prompt.input_ids[0].tolist())
        plen = seq.prompt_len
        processors = build_gates(cfg, self.classes, start=plen)
        processors.extend(f.draft_processors(self.classes))
        limit = float(cfg.time_limit_s or 0)
        gen = torch.Generator().manual_seed(cfg.seed)
        cloud = f.wrap_runner(b.make_runner(b.cloud, "cloud"), "cloud")
        if cfg.drafter == "head":   # the head reads the cloud's features (decoding/head.py)
            cloud, edge = head_runners(b, cloud, stale="stale_features" in f,
                                       sampled_tree=cfg.draft_tree != "chain" and cfg.verify == "sampling")
        else:
            edge = f.wrap_runner(b.make_runner(b.edge, "edge"), "edge")
        # the entropy gate in nats, resolved ONCE (entropy_unit=frac: a fraction of ln|V|, |V|
        # the width of the edge logits the drafts come from); the trace keeps both
        vocab = logits_width(edge)
        gate = cfg.threshold_nats(vocab)
        info = {**prompt.info, "vocab_size": vocab, "entropy_threshold_nats": gate,
                "dtype": model_dtype(b)}
        run = Run(
            cfg=cfg, seq=seq, edge=edge, gate=gate,
            cloud=cloud, verifier=make_verifier(cloud, cfg, gen),
            processors=processors,
            stopper=f.wrap_stopper(build_stopper(cfg, self.classes, b.stop_ids, plen), self.tokenizer),
            verify=f.wrap_verify(steps.verify), commit=f.wrap_commit(steps.commit),
            gen=gen,
            trace=Trace(prompt_len=plen, config=self.declared.to_dict(), backend=b.name, info=info),
            text=TextLookup(self.classes.texts), detail=self.detail, cancel=cancel,
            deadline=t0 + limit if limit > 0 else None,
            # the draft loop needs each token's distribution (not only for the trace) to sample,
            # for the entropy gate and for cycle resampling
            need_p=(cfg.temperature > 0 or gate is not None
                    or cfg.cycle_action == "resample"), faults=frozenset(f.names))
        if cfg.draft_tree != "chain" and (why := tree_unsupported(cloud, edge)):
            run.cfg = cfg.replace(draft_tree="chain")
            run.warn({"kind": "tree_unsupported", "message": f"draft_tree={cfg.draft_tree}: {why}; "
                      "running chains"})
        info["engine"], why = apply_engine(run.cfg, plen, run.edge, run.cloud)   # engine.py
        if why:
            run.warn({"kind": "engine", "message": why})
        run.edge.prefill(prompt)
        run.cloud.prefill(prompt)
        return run

    def _finish(self, run: Run, wall: float, caller: float = 0.0, prompt=None) -> Trace:
        tr = run.trace
        # after the clock stopped, outside every round: one teacher-forced cloud forward over
        # the output with and without the audio (benchmarks turn it off: dependence=False)
        dep = audio_dependence(self.backend, prompt, tr.token_ids) if self.dependence and prompt else None
        tr.ended_by = run.ended_by
        if run.ended_by == "time_limit":
            run.warn({"kind": "time_limit", "message": f"the decode hit its time limit of "
                      f"{self.cfg.time_limit_s:g} s after {len(tr.tokens)} tokens (time_limit_s)"})
        tr.text = self.tokenizer.decode(tr.token_ids, skip_special_tokens=True)
        apply_dependence(tr, dep)
        tr.metrics = compute_metrics(tr, wall, run.edge.forwards, run.cloud.forwards)
        tr.metrics["time_split"] = time_split(tr.rounds, wall, _busy(run.edge), _busy(run.cloud),
                                              caller_s=caller)
        if dep:
            tr.metrics["audio_dependence"] = {k: dep[k] for k in ("seconds", "forwards", "method")}
        # findings come from the one check list, on a recording of this run, and the decoder's
        # own (checks.py, from its warnings), written once by recorder/report.finish
        return tr


def apply_dependence(tr: Trace, dep: dict | None) -> None:
    """The audio-dependence forward's values on the trace's tokens."""
    for t, v, a in zip(tr.tokens, dep["values"], dep["audio_free_ids"]) if dep else ():
        t.audio_dependence, t.audio_free_id = v, a


def tree_unsupported(cloud, edge) -> str | None:
    """Why this pair cannot verify a tree in one forward (None: it can)."""
    if getattr(cloud, "verifier", None) is not None:
        return "a remote cloud (--cloud-url) cannot take a tree attention mask"
    if any(getattr(type(r), "positions", None) is not ModelRunner.positions for r in (cloud, edge)):
        return "this backend's positions (Omni's mrope) have no tree form here"
    return None


def model_dtype(backend) -> str | None:
    """The dtype the cloud runs in ('float32', 'bfloat16'); a remote cloud: the edge's."""
    for m in (getattr(backend, "cloud", None), getattr(backend, "edge", None)):
        try:
            return str(next(m.parameters()).dtype).removeprefix("torch.")
        except (AttributeError, StopIteration, TypeError):
            continue
    return None


def _busy(runner) -> float:
    """Seconds inside the runner's forwards so far (a remote cloud has none: request_s)."""
    return getattr(runner, "busy_s", 0.0)
