"""The Live tab's served engine source (issue 49): audit a vLLM server running its own
speculative decoding on the picked clip. The server comes from the operator's allowlist, as
the remote cloud's (ui/cloud.py, docs/remote.md); the run is coloured by the engine's per-step
counts, its acceptance plotted, its findings listed as for every run (docs/audit.md)."""
from __future__ import annotations

import traceback
from pathlib import Path

import gradio as gr

from components.findings import findings_html as diagnostics_html
from components.served_plot import acceptance_figure
from components.status import status_html
from components.token_view import render_tokens
from specdec_core.errors import UserError

from . import common
from .cloud import checked_cloud_url, cloud_url_widget

REPLAY = ("none", "ngram", "the backend's edge")


class ServedPanel:
    def __init__(self, live):
        with gr.Accordion("Served engine: audit a vLLM server's own speculative decoding", open=False):
            self.url = cloud_url_widget()
            self.url.elem_id, self.url.label = "live-served-url", "served engine (vLLM with speculative decoding)"
            self.replay = gr.Radio(list(REPLAY), value="none", label="replay the declared drafter",
                                   elem_id="live-served-replay")
            self.btn = gr.Button("Audit the served engine", elem_id="live-served-run")
            self.status = gr.HTML("", elem_id="live-served-status")
            self.tokens = gr.HTML("", elem_id="live-served-tokens")
            self.plot = gr.Plot(acceptance_figure(None), show_label=False, elem_id="live-served-plot")
            self.findings = gr.HTML(diagnostics_html(None), elem_id="live-served-findings")
        self.btn.click(run, [live.sample, live.audio, live.backend, self.url, self.replay],
                       [self.status, self.tokens, self.plot, self.findings], api_name="served_audit",
                       api_visibility="undocumented", concurrency_id="decode")


def run(sample, audio, backend_name, url, replay):
    from specdec_core.api import prepare
    from specdec_core.audit import audit
    from specdec_core.decoding.config import DecodeConfig

    try:
        url = checked_cloud_url(url)                 # refused here, before any connection
        if not url:
            raise UserError("pick a served engine first (its URL, from the operator's list)")
        src, name = common.resolve_audio(sample, audio)
        backend = common.get_backend(backend_name)
        ids = prepare(backend, src, DecodeConfig()).input_ids[0].tolist()
        folder = getattr(backend.edge, "name_or_path", None)
        rep = audit(backend, url, [(name, ids)], replay={"ngram": "ngram", REPLAY[2]: folder}.get(replay))
    except Exception as e:  # noqa: BLE001 - the page stays usable; bugs are logged
        if not isinstance(e, UserError):
            traceback.print_exc()
        return (status_html("err", "Could not audit", common.user_message(e)), "",
                acceptance_figure(None), diagnostics_html(None))
    r = rep["results"][0]
    spec = r["metrics"]["speculative_decoding"] or {}
    detail = (f"{len(r['token_ids'])} tokens · {spec.get('num_spec_steps', 0)} steps · mean acceptance "
              f"length {spec.get('mean_acceptance_length', 1.0):.2f} · "
              + ("same as the reference" if (r["reference"] or {}).get("matches") else "differs from the reference"))
    kind = "err" if any(f["severity"] == "error" for f in rep["findings"]) else "ok"
    return (status_html(kind, f"Audited {Path(name).name} on {rep['engine']['url']}", detail),
            render_tokens(r["trace"]), acceptance_figure(rep), diagnostics_html(rep["findings"]))
