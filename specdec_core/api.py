"""The engine facade: what the app, the CLI and batch call. One clip in, events or a result out.

`cancel` (a threading.Event) ends a decode within one round with ended_by="cancelled";
cfg.time_limit_s ends it with "time_limit". Both still give a complete trace and metrics."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterator

from specdec_core.backends import load_backend, prepare  # noqa: F401  (re-exported)
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.live import LiveTrace  # noqa: F401  (re-exported)
from specdec_core.errors import UserError
from specdec_core.recorder import judged_run
from specdec_core.result import ClipResult

def with_cloud(backend, cloud_url: str | None, *cfgs: DecodeConfig, model: str | None = None):
    """The backend with its cloud behind the OpenAI-compatible server at cloud_url (checked
    now: reachable, serving a model with the edge's vocabulary, configurations it can verify
    exactly); a blank URL keeps the local cloud. Problems raise a one-line BackendError."""
    if not (cloud_url or "").strip():
        return backend
    from specdec_core.backends.remote import RemoteCloud, refuse

    for cfg in cfgs:
        refuse(cfg)
    return RemoteCloud(backend, cloud_url.strip(), model)


def open_backend(opts, *cfgs: DecodeConfig):
    """The backend `opts` names (an argparse namespace or any object with backend, edge_model,
    cloud_model, prompt, device, cloud_url); with cloud_url its cloud is the server's, checked
    now against the configurations it will run."""
    url = getattr(opts, "cloud_url", None)
    options = {k: getattr(opts, k, None)
               for k in ("edge_model", "cloud_model", "prompt", "device", "dtype")}
    if url:
        options["cloud_model"] = None      # with a server, --cloud-model names the served model
    backend = load_backend(opts.backend, **{k: v for k, v in options.items() if v})
    return with_cloud(backend, url, *cfgs, model=getattr(opts, "cloud_model", None) if url else None)


def stream_prompt(backend, prompt, cfg: DecodeConfig, cancel: threading.Event | None = None) -> Iterator[dict]:
    """Events of one speculative decode of a prompt that `prepare` built. The run is recorded (on
    private copies of the models: other sessions may decode on them) and judged by the recorder's checks."""
    from specdec_core.recorder import judged_stream

    yield from judged_stream(backend, prompt, cfg, cancel=cancel, isolated=True)


def run_clip(backend, audio_src, cfg: DecodeConfig, baseline: bool = False, name: str | None = None,
             cancel: threading.Event | None = None, speaker=None) -> ClipResult:
    """One entry of the CLI's `results` list (a ClipResult: its JSON entry, its recording and
    Evidence for `run`'s pooled checks). User errors become {"ok": false, "error": ...}.
    A cancelled or timed-out decode is still ok, with metrics.ended_by saying so."""
    label = name or (str(audio_src) if isinstance(audio_src, (str, Path))
                     else None if audio_src is None else "<array>")
    try:
        prompt = prepare(backend, audio_src, cfg, speaker=speaker)
        got: dict = {}
        judged_run(backend, prompt, cfg, cancel=cancel, out=got)
        res, own = got["result"], got["result"].trace
        res.audio, res.trace, res.extra["metrics"] = label, own.to_dict(), own.metrics
        if baseline and own.ended_by not in ("cancelled", "time_limit"):
            from specdec_core.recorder import compare

            # the reference, the numerics probe and the bug-or-numerics verdict at the first
            # divergence (baseline.first_divergence, trace.numerics; docs/recorder.md)
            res.extra["baseline"] = base = compare(backend, prompt, cfg, res)
            own.metrics["matches_baseline"] = base["token_ids"] == own.token_ids
        return res
    except UserError as e:
        return ClipResult("run", label, ok=False, error=str(e))
