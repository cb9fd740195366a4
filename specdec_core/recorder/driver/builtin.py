"""The built-in SpeculativeDecoder run under the Recorder: every built-in run (CLI `run`, the
Live tab, batch) is judged by the same blind checks as a user's decoder; nothing here reads
cfg.faults. Where other sessions decode on the same loaded models (the app), `isolated=True`
records on private copies of a small pair (the hooks and concurrent decodes never cross over)
and, for a pair too large to copy, holds a process-wide lock for the decode."""
from __future__ import annotations

import copy
from functools import partial

import torch

from specdec_core.analysis.audio_dependence import acceptance_by_dependence
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder, apply_dependence
from specdec_core.backends.remote import RemoteCloud
from specdec_core.recorder import report
from specdec_core.recorder.driver.clip import ENGINE_KNOBS, isolate, recorded
from specdec_core.recorder.observe.remote_rows import remote_forward


def declared_knobs(backend, cfg: DecodeConfig) -> dict:
    """What a user of the built-in decoder declares: the knobs as set (the faults are bugs in
    the code, not declarations)."""
    d = {n: getattr(cfg, n) for n in ENGINE_KNOBS if n != "rank_threshold" or cfg.verify == "rank"}
    if cfg.entropy_threshold is not None:  # declared in nats, as the decoder resolves it
        from specdec_core.decoding.run import logits_width
        edge = backend.make_runner(backend.edge, "edge")
        d["entropy_threshold"] = cfg.threshold_nats(logits_width(edge))
    return d


def judged_stream(backend, prompt, cfg: DecodeConfig, trace: bool = True, cancel=None,
                  isolated: bool = False, out: dict | None = None):
    """decoder.stream's events; the final "done" trace carries the recorder's findings as its
    diagnostics. `out` (optional) receives the recording, the recorded trace and the judged
    result (a ClipResult whose trace is the decoder's own)."""
    b, lock = isolate(backend, isolated)
    if isinstance(b, RemoteCloud):       # its verify requests are the cloud's forwards: a copy
        b = copy.copy(b)                 # of the wrapper holds this recording's observer
    dec = SpeculativeDecoder(b, cfg, trace=trace, dependence=False)   # judged below: recorded()
    remote = isinstance(b, RemoteCloud)
    head = getattr(b, "head", None) if cfg.drafter == "head" and not remote else None   # issue 35
    # a remote cloud's local model (kept for the baseline) decodes nothing: hook a stand-in
    with lock, recorded(b, prompt, declared_knobs(b, cfg), cfg.seed, drafter=head, dependence=trace,
                        cloud=torch.nn.Module() if remote else None, builtin=True) as got:
        if remote:
            b.observer = partial(remote_forward, got["rec"])
        for ev in dec.stream(prompt, cancel=cancel):
            if ev["type"] == "done":
                break
            yield ev
        own = ev["trace"]
        got["out"] = own.token_ids
    res, dep = got["result"], got["dependence"]
    apply_dependence(own, dep)
    if dep:
        own.metrics["audio_dependence"] = {k: dep[k] for k in ("seconds", "forwards", "method")}
        own.metrics["acceptance_by_dependence"] = acceptance_by_dependence(own)
    recorded_trace, res.trace, res.shape = res.trace, own, "run"
    report.finish(res)      # the findings, with the decoder's own q check and a stop's end
    if out is not None:
        out.update(recording=res.recording, trace=recorded_trace, result=res)
    yield ev


def judged_run(backend, prompt, cfg: DecodeConfig, cancel=None, isolated: bool = False,
               out: dict | None = None):
    """The built-in decoder's Trace, its diagnostics from the one check list (`out`: as for
    judged_stream, e.g. the recording for `run`'s pooled findings)."""
    for ev in judged_stream(backend, prompt, cfg, cancel=cancel, isolated=isolated, out=out):
        pass
    return ev["trace"]


def record_builtin(backend, prompt, cfg: DecodeConfig):
    """Run the built-in decoder on `prompt` under the Recorder.
    Returns (recording, recorded trace, findings, the decoder's own trace)."""
    out: dict = {}
    own = judged_run(backend, prompt, cfg, out=out)
    return out["recording"], out["trace"], own.diagnostics, own
