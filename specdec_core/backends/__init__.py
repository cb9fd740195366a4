"""Backends by name: a backend is one entry of registry.REGISTRY. Loaded backends are cached
(models load once)."""
from __future__ import annotations

import os
import threading
from functools import lru_cache

from specdec_core.errors import BackendError, UserError
from specdec_core.backends.base import Backend, PromptInputs  # noqa: F401
from specdec_core.backends.registry import BACKENDS, REGISTRY, Entry, entry  # noqa: F401


DTYPES = ("float32", "bfloat16", "float16")


def torch_dtype(name):
    """'float32' | 'bfloat16' | 'float16' (or None: the backend's default) -> torch dtype."""
    if name is None or name == "":
        return None
    import torch

    if not isinstance(name, str):
        if name in (torch.float32, torch.bfloat16, torch.float16):
            return name
        name = str(name)
    key = name.removeprefix("torch.")
    if key not in DTYPES:
        raise BackendError(f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return getattr(torch, key)


def available_backends() -> list[str]:
    """Backends a user can pick now: demo always; omni/hf when models are configured."""
    return [n for n, e in REGISTRY.items() if all(os.environ.get(v) for v in e.env)]


def load_backend(name: str = "demo", **options) -> Backend:
    entry(name)
    # One load at a time: from_pretrained is not thread-safe (an app warm-up thread racing a
    # request left a tied lm_head randomly initialised), and the cache must see one loader.
    if options.get("dtype") is not None:
        options["dtype"] = str(torch_dtype(options["dtype"])).removeprefix("torch.")
    with _LOAD_LOCK:
        return _load(name, tuple(sorted((k, v) for k, v in options.items() if v is not None)))


_LOAD_LOCK = threading.Lock()


@lru_cache(maxsize=4)
def _load(name: str, options: tuple) -> Backend:
    from specdec_core import pairs

    opts = dict(options)
    # The pair check (specdec_core/pairs) reads both folders' own files before any weights: an
    # error finding stops the load with its one line; the report rides on the backend.
    report = pairs.check_backend(name, opts)
    if pairs.error_message(report):
        raise BackendError(pairs.error_message(report))
    pairs.versions.warn_if_untested()
    if "dtype" in opts:
        opts["dtype"] = torch_dtype(opts["dtype"])
    backend = entry(name).build(opts)
    backend.pair_check = report
    return backend


MAX_SECONDS = float(os.environ.get("SPECSCOPE_MAX_SECONDS", "60"))


def prepare(backend, audio_src, cfg, max_seconds: float = MAX_SECONDS, speaker=None):
    """audio (path, bytes or (sr, array)) -> PromptInputs, plus audio warnings in info.
    `speaker`: prosody statistics of the clip's speaker (audio.prosody.speaker_stats)."""
    audio = None
    if backend.needs_audio:
        from specdec_core.audio.loading import load_audio

        if audio_src is None:
            raise UserError("no audio given: upload a clip or pick a sample")
        audio = load_audio(audio_src, max_seconds=max_seconds)
        audio.speaker = speaker
    prompt = backend.build_inputs(audio, cfg.prompt_type)
    if audio is not None:
        prompt.info.setdefault("audio", {"name": audio.name, "duration_s": round(audio.duration, 3),
                                         "source_sr": audio.source_sr, "channels": audio.channels,
                                         "silent": audio.silent, "warnings": list(audio.warnings)})
    return prompt
