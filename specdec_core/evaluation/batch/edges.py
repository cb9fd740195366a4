"""One edge worker of a batch: the backend opened once, then one clip x configuration at a time.

`EdgeSession` is what every engine runs a row with (local: one per process; Ray: one per actor).
Each cloud server URL gets its remote-cloud wrapper on first use (checked then: reachable, same
vocabulary), so a row can go to any server."""
from __future__ import annotations

import os
import socket

from specdec_core.decoding.config import DecodeConfig
from specdec_core.errors import UserError

SPEC_KEYS = ("backend", "edge_model", "cloud_model", "prompt", "device", "dtype")


def backend_spec(args) -> dict:
    """What a worker needs to open the same backend as the CLI's flags (not the cloud URLs:
    the batch hands each row its server)."""
    return {k: getattr(args, k, None) for k in SPEC_KEYS}


class EdgeSession:
    def __init__(self, spec: dict, configs: dict[str, dict]):
        self.spec = dict(spec)
        self.configs = {k: DecodeConfig.from_dict(v) for k, v in configs.items()}
        self.raw = dict(configs)
        self.base = None
        self.remote: dict[str, object] = {}

    def open(self, url: str | None = None):
        """The backend for a row on `url` (None: the local cloud). Raises UserError."""
        from specdec_core.api import load_backend, with_cloud

        if self.base is None:
            opts = {k: self.spec.get(k) for k in SPEC_KEYS[1:]}
            if self.spec.get("remote"):
                opts["cloud_model"] = None     # with servers, --cloud-model names the served model
            self.base = load_backend(self.spec.get("backend") or "demo",
                                     **{k: v for k, v in opts.items() if v})
        if url is None:
            return self.base
        if url not in self.remote:
            self.remote[url] = with_cloud(self.base, url, *self.configs.values(),
                                          model=self.spec.get("cloud_model"))
        return self.remote[url]

    def warm(self, urls=()) -> None:
        """Open the backend and its wrapper for every server that answers now. A backend that
        cannot be opened, or a reachable server that cannot verify for it (another vocabulary,
        no such model), raises UserError: a usage error, not a row failure."""
        from specdec_core.evaluation.batch.clouds import probe

        self.open()
        for url in urls:
            try:
                self.open(url)
            except UserError:
                if probe(url) is None:
                    raise

    def run(self, job, url: str | None = None, speaker=None, cancel=None) -> dict:
        """One row: (clip, config name) decoded on the backend for url; never raises. speaker:
        the clip's speaker statistics (evaluation.batch.speaker_stats_for), if any; cancel: a
        threading.Event that stops the decode within one round."""
        from specdec_core.evaluation.batch.run import _run_one, failed_row

        clip, cname = job
        try:
            backend = self.open(url)
        except UserError as e:
            row = failed_row(clip, cname, self.raw[cname], str(e))
        else:
            row = _run_one(backend, clip, cname, self.configs[cname], cancel, speaker)
        if url is not None:
            row["cloud"] = url          # the server that verified this row
        return row


class EdgeActor:
    """The Ray actor (ray.remote(EdgeActor), one CPU): one torch thread, one EdgeSession."""

    def __init__(self, spec: dict, configs: dict[str, dict]):
        import torch

        torch.set_num_threads(1)
        self.session = EdgeSession(spec, configs)

    def open(self, urls=()) -> str | None:
        """Load the backend now (warm-up); the one-line error when it cannot be opened."""
        try:
            self.session.warm(urls)
        except UserError as e:
            return str(e)
        return None

    def where(self) -> str:
        return f"{socket.gethostname()}:{os.getpid()}"

    def run(self, job, url: str | None, speaker=None) -> tuple[dict, str]:
        return self.session.run(job, url, speaker), self.where()
