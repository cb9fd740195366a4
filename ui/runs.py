"""One decode as a stream of partial traces (specdec_core.api); each run owns its cancel Event and Clock."""
from __future__ import annotations

import threading

from components.findings import findings_html
from specdec_core.api import LiveTrace, prepare, stream_prompt
from specdec_core.decoding.faults import latent
from specdec_core.decoding.reference import reference_for, same_reference
from specdec_core.recorder import compare
from specdec_core.decoding.config import DecodeConfig
from specdec_core.result import ClipResult

from specdec_core.caps import cap_config, note_cuts
from specdec_core.evaluation.bench.speedup import REPEATS, ordered, speedup_stats, time_interleaved

from .common import running, token_texts
from .limits import in_slot, take_turns
from .views import Clock


class Run:
    """Iterate for (LiveTrace, new_warnings) per event; closing early or setting `cancel` stops it in a round."""

    def __init__(self, backend, audio_src, cfg: DecodeConfig, session: str = "", name: str = "",
                 cancel: threading.Event | None = None):
        self.backend, self.cfg, self.session, self.name = backend, cap_config(cfg), session, name
        self.asked = cfg             # before the server's caps: cut_notes says what a cap ended
        self.cancel = cancel or threading.Event()
        self.prompt = prepare(backend, audio_src, self.cfg)   # raises AudioError before anything runs
        self.live = LiveTrace(self.cfg.to_dict(), tokenizer=backend.tokenizer)
        self.clock = Clock()
        self.baseline: dict | None = None
        self.reference = None        # (cloud-only result, its logits) once run_baseline ran

    def __iter__(self):
        with running(self.session, self.cancel):   # closed early: whatever still runs for it stops
            events = stream_prompt(self.backend, self.prompt, self.cfg, cancel=self.cancel)
            for ev in take_turns(events, self.session, self.cancel):   # slots shared round by round
                new = self.live.add(ev)
                if self.live.done:    # a cap that ended the run says so, with its variable
                    new = new + note_cuts(self.live.trace, self.asked, self.cfg)
                yield self.live, new

    def to_end(self) -> "Run":
        """Decode to the end without streaming (the API's /run, the served panel's side B)."""
        for _ in self:
            pass
        return self

    @property
    def stopped(self) -> bool:
        return self.live.trace.get("ended_by") in ("cancelled", "time_limit")

    def run_baseline(self, reference=None) -> dict | None:
        if self.stopped:   # a stopped run has nothing to compare with
            return None
        # the reference, its numerics probe and the bug-or-numerics verdict (issue 27);
        # `reference` (another Run's .reference) reuses its cloud-only decode
        self.reference = reference or in_slot(reference_for, self.backend, self.prompt, self.cfg)
        self.baseline = in_slot(compare, self.backend, self.prompt, self.cfg, self.live.trace,
                                reference=self.reference)
        return self.baseline

    def result(self, baseline: bool = False) -> dict:
        """The CLI's per-clip result entry (design.md, CLI contract); `baseline`: run_baseline first."""
        base = self.run_baseline() if baseline else self.baseline
        tr = self.live.trace
        extra = {"metrics": tr.get("metrics", {})} if base is None else {"baseline": base, "metrics": {
            **tr.get("metrics", {}), "matches_baseline": base["token_ids"] == tr.get("token_ids")}}
        return ClipResult("run", self.name, trace=tr, findings=tr.get("diagnostics"), extra=extra).to_dict()

    def findings_html(self) -> str:
        """The finished run's findings as every tab draws them (token ids as text, no false clean bill)."""
        tr = self.live.trace
        return findings_html(tr.get("diagnostics"), token_texts(self.backend.tokenizer),
                             (tr.get("metrics") or {}).get("cloud_calls"), latent(self.cfg.to_dict()))

    def results_file_obj(self) -> dict:
        return {"backend": self.backend.name, "config": self.cfg.to_dict(), "results": [self.result()]}


def time_repeats(runs: list, session: str, bases=(None, None), n: int = REPEATS):
    """([decode times per run], [cloud-only times per run or None]) from `n` quiet repeats interleaved
    A B C, C B A (evaluation/bench/speedup.py; issue 43); None when a run was stopped or Stop is pressed."""
    if any(r.stopped for r in runs):
        return None
    sides, at = [("decode", r.cfg, r.prompt) for r in runs], []    # at: each run's cloud-only side
    for r, base in zip(runs, bases):
        if base and at and at[0] is not None and same_reference(runs[0].cfg, r.cfg):
            at.append(at[0])
        elif base:
            sides.append(("cloud_only", r.cfg, r.prompt))
            at.append(len(sides) - 1)
        else:
            at.append(None)
    with running(session) as cancel:     # stoppable by the session's Stop
        t = time_interleaved(runs[0].backend, sides, n, cancel)
    return None if t is None else (t[:len(runs)], [None if i is None else t[i] for i in at])


def side_speedups(runs: list, bases, samples) -> list:
    """Each run's speed-up over cloud-only from the repeats (spread, lossy, acceptance bound)."""
    if not samples:
        return [None] * len(runs)
    out = []
    for r, base, xs, cs in zip(runs, bases, *samples):
        m = r.live.trace.get("metrics") or {}
        out.append(speedup_stats(xs, cs, m.get("new_tokens"), m.get("cloud_calls"),
                                 base["token_ids"] == r.live.trace.get("token_ids")) if base and cs else None)
    return ordered(out)
