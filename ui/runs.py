"""One decode as a stream of partial traces, through the engine facade (specdec_core.api). Each
run owns a cancel Event (registered per session, so a Stop button sets it) and a Clock for the
throttle of streamed updates; nothing of a run lives on page-wide objects."""
from __future__ import annotations

import threading

from components.findings import findings_html
from specdec_core.api import LiveTrace, prepare, stream_prompt
from specdec_core.decoding.faults import latent
from specdec_core.decoding.reference import compare, reference_for
from specdec_core.decoding.config import DecodeConfig

from specdec_core.caps import cap_config, note_cuts
from specdec_core.evaluation.speedup import REPEATS, speedup_stats, time_interleaved

from .common import running, token_texts
from .limits import in_slot, take_turns
from .views import Clock


class Run:
    """Iterate to get (LiveTrace, new_warnings) after every decoder event. Closing the iterator
    early (a cancelled Gradio generator) or setting `cancel` ends the decode within one round."""

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

    def result(self) -> dict:
        """The CLI's per-clip result entry (design.md, CLI contract)."""
        tr = self.live.trace
        res = {"audio": self.name, "ok": True, "text": tr.get("text", ""),
               "token_ids": tr.get("token_ids", []), "metrics": tr.get("metrics", {}), "trace": tr}
        if self.baseline is not None:
            res["baseline"] = self.baseline
            res["metrics"] = {**res["metrics"],
                              "matches_baseline": self.baseline["token_ids"] == tr.get("token_ids")}
        return res

    def findings_html(self) -> str:
        """The finished run's findings as every tab draws them (components/findings.py): token
        ids as text, no cloud call or a latent fault never read as a clean bill."""
        tr = self.live.trace
        return findings_html(tr.get("diagnostics"), token_texts(self.backend.tokenizer),
                             (tr.get("metrics") or {}).get("cloud_calls"), latent(self.cfg.to_dict()))

    def results_file_obj(self) -> dict:
        return {"backend": self.backend.name, "config": self.cfg.to_dict(), "results": [self.result()]}


def time_sides(backend, sides: list, session: str, n: int = REPEATS) -> list[list[float]] | None:
    """The quiet interleaved repeats of evaluation/speedup.py, stoppable by the session's Stop."""
    with running(session) as cancel:
        return time_interleaved(backend, sides, n, cancel)


def vs_cloud(run: Run, session: str) -> dict | None:
    """One run's speed-up over cloud-only, both timed on interleaved quiet repeats (issue 43);
    None without a baseline or when stopped."""
    if run.baseline is None or run.stopped:
        return None
    t = time_sides(run.backend, [("decode", run.cfg, run.prompt), ("cloud_only", run.cfg, run.prompt)], session)
    m = run.live.trace.get("metrics") or {}
    same = run.baseline["token_ids"] == run.live.trace.get("token_ids")
    return None if t is None else speedup_stats(t[0], t[1], m.get("new_tokens"), m.get("cloud_calls"), same)
