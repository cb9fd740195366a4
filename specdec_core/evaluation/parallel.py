"""`batch --workers N`: N edge processes decode the clips; with --cloud-url they share one cloud
server, which batches their concurrent requests (how one big cloud model serves many edges).

Each worker opens the backend once (its own edge model, one torch thread) and then takes one
clip x configuration at a time, so a slow clip does not hold back the rest. Rows come back in
manifest order and go through the same BatchResult as a one-process batch. A worker that cannot
open its backend (the server is down just then) fails that row with the one-line error and tries
again on its next clip.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing as mp

from specdec_core.decoding.config import DecodeConfig
from specdec_core.errors import UserError

SPEC_KEYS = ("backend", "edge_model", "cloud_model", "prompt", "device", "cloud_url")

_backend = None       # per worker process


def backend_spec(args) -> dict:
    """What a worker needs to open the same backend as the CLI's flags."""
    return {k: getattr(args, k, None) for k in SPEC_KEYS}


def _init(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def _open(spec: dict):
    global _backend
    if _backend is None:
        from specdec_core.api import open_backend

        _backend = open_backend(argparse.Namespace(**{k: spec.get(k) for k in SPEC_KEYS}))
    return _backend


def _task(spec: dict, clip, cname: str, cfg: dict, baseline: bool) -> dict:
    from specdec_core.evaluation.batch import _run_one

    try:
        backend = _open(spec)
    except UserError as e:
        return _failed(clip, cname, cfg, str(e))
    return _run_one(backend, clip, cname, DecodeConfig.from_dict(cfg), baseline, None)


def _failed(clip, cname: str, cfg: dict, error: str) -> dict:
    from specdec_core.evaluation.batch import SCORE_COLUMNS, _one_line

    return {"config": cname, "name": clip.name, "audio": clip.path, "label": clip.label,
            "prompt_type": clip.prompt_type or cfg.get("prompt_type"), "reference": clip.reference,
            "ok": False, "error": _one_line(error), "text": None, "metrics": {},
            "scores": dict.fromkeys(SCORE_COLUMNS), "trace": None}


class EdgePool:
    """N worker processes that keep their backend between batches (the benchmark reuses one)."""

    def __init__(self, spec: dict, workers: int, threads: int = 1):
        if workers < 1:
            raise UserError(f"--workers must be >= 1, got {workers}")
        self.spec, self.workers = spec, workers
        self.ex = cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"),
                                         initializer=_init, initargs=(threads,))

    def warm(self) -> None:
        """Start every worker and open its backend (a spawned process imports torch: seconds)."""
        list(self.ex.map(_warm, [self.spec] * self.workers * 2))

    def run(self, clips, configs: dict[str, DecodeConfig], baseline: bool = False, on_row=None):
        from specdec_core.evaluation.batch import BatchResult

        jobs = [(clip, cname, cfg.to_dict()) for clip in clips for cname, cfg in configs.items()]
        futs = {self.ex.submit(_task, self.spec, clip, cname, cfg, baseline): i
                for i, (clip, cname, cfg) in enumerate(jobs)}
        rows: list = [None] * len(jobs)
        for done, fut in enumerate(cf.as_completed(futs), 1):
            i = futs[fut]
            try:
                rows[i] = fut.result()
            except Exception as e:   # a worker died (killed, out of memory): that row fails
                clip, cname, cfg = jobs[i]
                rows[i] = _failed(clip, cname, cfg, f"worker failed: {type(e).__name__}: {e}")
            if on_row:
                on_row({"type": "progress", "done": done, "total": len(jobs), "row": rows[i]})
        return BatchResult.from_rows(rows, {k: c.to_dict() for k, c in configs.items()},
                                     backend=self.spec.get("backend") or "")

    def close(self) -> None:
        self.ex.shutdown(wait=True, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _warm(spec: dict) -> bool:
    try:
        _open(spec)
    except UserError:
        return False
    return True


def run_parallel(spec: dict, clips, configs, workers: int, baseline: bool = False, on_row=None):
    with EdgePool(spec, workers) as pool:
        return pool.run(clips, configs, baseline, on_row)
