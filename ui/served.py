"""The Live tab's served engine (issue 49, docs/audit.md): audit a vLLM server's own speculative
decoding on the picked clip, optionally beside our decoder or a second server (audit.compare)."""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from components.compare import char_diff_html
from components.findings import findings_html
from components.formatting import esc
from components.served_plot import acceptance_figure
from components.status import status_html
from components.token_view import render_tokens
from specdec_core.audit import DEFINITIONS, NO_FINDINGS, compare, summary, verdict
from specdec_core.errors import UserError

from . import common
from .cloud import checked_cloud_url, cloud_url_widget
from .runs import Run

REPLAY = ("none", "ngram", "the backend's edge")
HELP = ("the URL of a vLLM server running its own speculative decoding (`make cloud-spec` serves "
        "the demo pair at http://127.0.0.1:8000); this page audits it from outside")
VERSUS = ("nothing", "our decoder (the Live tab's knobs)", "a second served engine")


class ServedPanel:
    def __init__(self, live):
        self.knobs = live.panel
        with gr.Accordion("Served engine: audit a vLLM server's own speculative decoding", open=False):
            self.url = cloud_url_widget("live-served-url", "served engine (vLLM with speculative decoding)", info=HELP)
            self.replay = gr.Radio(list(REPLAY), value="none", label="replay the declared drafter",
                                   elem_id="live-served-replay")
            with gr.Row():
                self.versus = gr.Radio(list(VERSUS), value=VERSUS[0], label="compare with",
                                       elem_id="live-served-versus")
                self.url_b = cloud_url_widget("live-served-url-b", "second served engine (B)", visible=False, info=HELP)
                self.replay_b = gr.Radio(list(REPLAY), value="none", label="replay B's declared drafter",
                                         elem_id="live-served-replay-b", visible=False)
            self.btn = gr.Button("Audit the served engine", elem_id="live-served-run")
            self.status = gr.HTML("", elem_id="live-served-status")
            self.plot = gr.Plot(acceptance_figure(None), show_label=False, elem_id="live-served-plot")
            self.verdict = gr.HTML("", elem_id="live-served-verdict")
            with gr.Row(equal_height=False):
                with gr.Column():
                    self.tokens = gr.HTML("", elem_id="live-served-tokens")
                    self.findings = gr.HTML(findings_html(None), elem_id="live-served-findings")
                self.side_b = gr.HTML("", elem_id="live-served-b", visible=False)
        self.versus.change(lambda v: (gr.update(visible=v != VERSUS[0]), *[gr.update(visible=v == VERSUS[2])] * 2),
                           self.versus, [self.side_b, self.url_b, self.replay_b], queue=False,
                           api_visibility="private")
        self.btn.click(self.handle, [live.sample, live.audio, live.backend, self.url, self.replay, self.versus,
                                     self.url_b, self.replay_b, *live.panel.inputs],
                       [self.status, self.tokens, self.plot, self.findings, self.side_b, self.verdict],
                       api_name="served_audit", api_visibility="undocumented", concurrency_id="decode")

    def handle(self, request: gr.Request, sample, audio, backend_name, url, replay, versus, url_b, replay_b,
               *knobs):
        return run(sample, audio, backend_name, url, replay, versus, url_b, replay_b,
                   knobs=self.knobs.to_config(knobs), session=common.session_of(request))


def run(sample, audio, backend_name, url, replay, versus=VERSUS[0], url_b=None, replay_b="none", knobs=None,
        session=""):
    """(A's status, tokens, plot, findings; side B's block; the verdict with the text diff)."""
    from specdec_core.api import prepare
    from specdec_core.decoding.config import DecodeConfig

    try:
        url = checked_cloud_url(url)                 # refused here, before any connection
        if not url:
            raise UserError("give the served engine's URL first")
        cfg = DecodeConfig.from_dict(knobs or {})
        src, name = common.resolve_audio(sample, audio)
        backend = common.get_backend(backend_name)
        # side B our decoder: the Live tab's own run (ui/runs.Run: its caps, slots and Stop)
        ours = Run(backend, src, cfg, session, name).to_end() if versus == VERSUS[1] else None
        ids = (ours.prompt if ours else prepare(backend, src, cfg)).input_ids[0].tolist()
        # against ours: as many tokens as our decoder gave (the engine has no sentence stop)
        n = max(1, len(ours.live.trace.get("token_ids") or [])) if ours else 48
        rep = _audit(backend, url, name, ids, replay, n)
    except Exception as e:  # noqa: BLE001 - the page stays usable; bugs are logged
        return (status_html("err", "Could not audit", common.failure(e)), "",
                acceptance_figure(None), findings_html(None), "", "")
    r = rep["results"][0]
    kind = "err" if any(f["severity"] == "error" for f in rep["findings"]) else "ok"
    a = (status_html(kind, f"{'A: ' * (versus != VERSUS[0])}Audited {Path(name).name} on {rep['engine']['url']}",
                     summary(rep)), render_tokens(r["trace"]), acceptance_figure(rep), _findings(rep["findings"]))
    if versus == VERSUS[0]:
        return (*a, "", "")
    if ours:
        tr = ours.live.trace
        m = tr.get("metrics") or {}
        b = ("B: our decoder", tr, f"{m.get('new_tokens', 0)} tokens · {m.get('cloud_calls', 0)} cloud calls · "
             f"mean acceptance length {m.get('mean_accepted_length') or 1.0:.2f}", findings_html(tr.get("diagnostics")),
             [DEFINITIONS["vllm"], DEFINITIONS["ours"]])
    else:
        try:
            url_b = checked_cloud_url(url_b)
            if not url_b:
                raise UserError("give the second served engine's (B) URL first")
            rep_b = _audit(backend, url_b, name, ids, replay_b, len(r["token_ids"]))
        except Exception as e:  # noqa: BLE001 - side A stays shown
            return (*a, status_html("err", "Could not audit B", common.failure(e)), "")
        rb = rep_b["results"][0]
        cmp = compare(rep, rep_b, backend.tokenizer)
        b = (f"B: {rep_b['engine']['url']}", rb["trace"], summary(rep_b), _findings(rep_b["findings"]),
             [f"acceptance by draft position, {s}: " + (", ".join(f"{x['position']}: {x['rate']:.0%}" for x in pos)
                                                        or "not known") for s, pos in zip("AB", cmp["by_draft_position"])]
             + cmp["definitions"])
    side_b = (f'<div class="ss-diff-block"><h5>{esc(b[0])}</h5><div class="ss-note">{esc(b[2])}</div>'
              + render_tokens(b[1]) + b[3] + "</div>")
    line = verdict(r["token_ids"], b[1].get("token_ids") or [], (r["reference"] or {}).get("token_ids"), backend.tokenizer)
    return (*a, side_b, "".join(f'<div class="ss-note">{esc(x)}</div>' for x in [line, *b[4]])
            + char_diff_html(r["text"], b[1].get("text"), names=("A", "B")))


def _audit(backend, url, name, ids, replay, max_tokens) -> dict:
    from specdec_core.audit import audit

    folder = getattr(backend.edge, "name_or_path", None)
    return audit(backend, url, [(name, ids)], replay={"ngram": "ngram", REPLAY[2]: folder}.get(replay),
                 max_tokens=max_tokens)


def _findings(found: list) -> str:
    """The findings as for every run; none: what the audit judged and what it cannot see."""
    return findings_html(found) if found else f'<div class="ss-findings"><div class="ss-none">{esc(NO_FINDINGS)}</div></div>'
