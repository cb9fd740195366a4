"""The backend registry: a backend is one entry (how to build it, where its two model folders
are, which environment variables offer it, whether it reads audio). Loading, the page's backend
list, the pair check (pairs/sides.py) and batch all read it."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from specdec_core.errors import BackendError


def _lazy(module: str, name: str, spread: bool = False) -> Callable[[dict], object]:
    """backends/<module>.<name> called on the options (name(**opts) with `spread`), imported only
    when called: a backend's imports are heavy."""
    def call(opts: dict):
        fn = getattr(importlib.import_module(f"specdec_core.backends.{module}"), name)
        return fn(**opts) if spread else fn(opts)
    return call


def _demo_paths(opts: dict) -> tuple[str, str]:
    from specdec_core.backends.demo import MODELS_DIR
    root = Path(opts.get("models_dir") or MODELS_DIR)
    return str(root / "edge"), str(root / "cloud")


def _omni_paths(opts: dict) -> tuple[str, str]:
    from specdec_core.backends.omni_loading import resolve_path
    return (resolve_path(opts.get("edge_model"), "SPECSCOPE_EDGE_MODEL", "edge"),
            resolve_path(opts.get("cloud_model"), "SPECSCOPE_CLOUD_MODEL", "cloud"))


def _hf(opts: dict):
    from specdec_core.backends.hf import HFBackend, hf_paths
    edge, cloud = hf_paths(opts)
    return HFBackend(edge, cloud, **{k: v for k, v in opts.items() if k not in ("edge_model", "cloud_model")})


@dataclass(frozen=True)
class Entry:
    build: Callable[[dict], object]                 # options -> the loaded backend
    paths: Callable[[dict], tuple[str, str]]        # options -> (edge folder, cloud folder)
    env: tuple[str, ...] = ()                       # all set: offered by available_backends
    reads_audio: bool = True


REGISTRY = {"demo": Entry(_lazy("demo", "DemoBackend", spread=True), _demo_paths),
            "omni": Entry(_lazy("omni", "OmniBackend", spread=True), _omni_paths,
                          ("SPECSCOPE_EDGE_MODEL", "SPECSCOPE_CLOUD_MODEL")),
            "hf": Entry(_hf, _lazy("hf", "hf_paths"), ("SPECSCOPE_HF_EDGE", "SPECSCOPE_HF_CLOUD"), reads_audio=False)}
BACKENDS = tuple(REGISTRY)


def entry(name: str) -> Entry:
    if name not in REGISTRY:
        raise BackendError(f"unknown backend {name!r}; choose from {', '.join(REGISTRY)}")
    return REGISTRY[name]
