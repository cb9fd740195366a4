"""One decode as a stream of partial traces (no Gradio here: the API endpoints and the tabs
share it). The decoder is registered per session so a Stop button can cancel it."""
from __future__ import annotations

from specdec_core.api import prepare
from specdec_core.decoding.baseline import cloud_only
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder

from .common import register, unregister
from .stream import LiveTrace


class Run:
    """Iterate to get (LiveTrace, new_warnings) after every decoder event."""

    def __init__(self, backend, audio_src, cfg: DecodeConfig, session: str = "", name: str = ""):
        self.backend, self.cfg, self.session, self.name = backend, cfg, session, name
        self.prompt = prepare(backend, audio_src, cfg)   # raises AudioError before anything runs
        self.decoder = SpeculativeDecoder(backend, cfg)
        self.live = LiveTrace(cfg.to_dict())
        self.baseline: dict | None = None

    def __iter__(self):
        register(self.session, self.decoder)
        try:
            for ev in self.decoder.stream(self.prompt):
                yield self.live, self.live.add(ev)
        finally:
            unregister(self.session, self.decoder)

    def run_baseline(self) -> dict:
        self.baseline = cloud_only(self.backend, self.prompt, self.cfg)
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

    def results_file_obj(self) -> dict:
        return {"backend": self.backend.name, "config": self.cfg.to_dict(), "results": [self.result()]}
