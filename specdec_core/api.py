"""What the app, the CLI and batch call: one clip in, events or a result dict out."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

from specdec_core.backends import load_backend  # noqa: F401  (re-exported)
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.errors import UserError

MAX_SECONDS = float(os.environ.get("SPECSCOPE_MAX_SECONDS", "60"))


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


def prepare(backend, audio_src, cfg: DecodeConfig, max_seconds: float = MAX_SECONDS):
    """audio (path, bytes or (sr, array)) -> PromptInputs, plus audio warnings in info."""
    audio = None
    if backend.needs_audio:
        from specdec_core.audio.loading import load_audio

        if audio_src is None:
            raise UserError("no audio given: upload a clip or pick a sample")
        audio = load_audio(audio_src, max_seconds=max_seconds)
    prompt = backend.build_inputs(audio, cfg.prompt_type)
    if audio is not None:
        prompt.info.setdefault("audio", {"name": audio.name, "duration_s": round(audio.duration, 3),
                                         "source_sr": audio.source_sr, "channels": audio.channels,
                                         "silent": audio.silent, "warnings": list(audio.warnings)})
    return prompt


def stream_clip(backend, audio_src, cfg: DecodeConfig, decoder: SpeculativeDecoder | None = None,
                trace: bool = True) -> Iterator[dict]:
    """Events of one speculative decode (see docs/architecture.md). Pass your own decoder to be
    able to cancel() it from another thread."""
    prompt = prepare(backend, audio_src, cfg)
    dec = decoder or SpeculativeDecoder(backend, cfg, trace=trace)
    yield from dec.stream(prompt)


def run_clip(backend, audio_src, cfg: DecodeConfig, baseline: bool = False, name: str | None = None) -> dict:
    """One entry of the CLI's `results` list. User errors become {"ok": false, "error": ...}."""
    label = name or _name(audio_src)
    try:
        prompt = prepare(backend, audio_src, cfg)
        tr = SpeculativeDecoder(backend, cfg).run(prompt)
        res = {"audio": label, "ok": True, "text": tr.text, "token_ids": tr.token_ids,
               "metrics": tr.metrics, "trace": tr.to_dict()}
        if baseline:
            from specdec_core.decoding.baseline import cloud_only

            res["baseline"] = cloud_only(backend, prompt, cfg)
            res["metrics"]["matches_baseline"] = res["baseline"]["token_ids"] == tr.token_ids
        return res
    except UserError as e:
        return {"audio": label, "ok": False, "error": str(e)}


def _name(src) -> str | None:
    if isinstance(src, (str, Path)):
        return str(src)
    return None if src is None else "<array>"
