"""The Live tab's served engine source (issue 49): audit a vLLM server running its own
speculative decoding on the picked clip. The server comes from the operator's allowlist, as
the remote cloud's (ui/cloud.py, docs/remote.md); the run is coloured by the engine's per-step
counts, its acceptance plotted, its findings listed as for every run (docs/audit.md).
"compare with": side B is our decoder on the same prompt with the Live tab's knobs (the Live
tab's own run, ui/runs.Run) or a second server audited the same way; the two shown side by
side, their texts diffed and a verdict line says where they first differ."""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from components.compare import char_diff_html
from components.findings import findings_html
from components.formatting import esc
from components.served_plot import acceptance_figure
from components.status import status_html
from components.token_view import render_tokens
from specdec_core.analysis.divergence import common_prefix
from specdec_core.errors import UserError

from . import common
from .cloud import checked_cloud_url, cloud_url_widget
from .runs import Run

REPLAY = ("none", "ngram", "the backend's edge")
VERSUS = ("nothing", "our decoder (the Live tab's knobs)", "a second served engine")


class ServedPanel:
    def __init__(self, live):
        self.knobs = live.panel
        with gr.Accordion("Served engine: audit a vLLM server's own speculative decoding", open=False):
            self.url = cloud_url_widget("live-served-url", "served engine (vLLM with speculative decoding)")
            self.replay = gr.Radio(list(REPLAY), value="none", label="replay the declared drafter",
                                   elem_id="live-served-replay")
            with gr.Row():
                self.versus = gr.Radio(list(VERSUS), value=VERSUS[0], label="compare with",
                                       elem_id="live-served-versus")
                self.url_b = cloud_url_widget("live-served-url-b", "second served engine (B)", visible=False)
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
            raise UserError("pick a served engine first (its URL, from the operator's list)")
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
    a = (status_html(kind, f"Audited {Path(name).name} on {rep['engine']['url']}", _numbers(rep)),
         render_tokens(r["trace"]), acceptance_figure(rep), findings_html(rep["findings"]))
    if versus == VERSUS[0]:
        return (*a, "", "")
    if ours:
        tr = ours.live.trace
        b = ("B: our decoder", tr, _numbers(None, tr), tr.get("diagnostics"))
    else:
        try:
            url_b = checked_cloud_url(url_b)
            if not url_b:
                raise UserError("pick the second served engine (B) first, from the operator's list")
            rep_b = _audit(backend, url_b, name, ids, replay_b, len(r["token_ids"]))
        except Exception as e:  # noqa: BLE001 - side A stays shown
            return (*a, status_html("err", "Could not audit B", common.failure(e)), "")
        rb = rep_b["results"][0]
        b = (f"B: {rep_b['engine']['url']}", rb["trace"], _numbers(rep_b), rep_b["findings"])
    side_b = (f'<div class="ss-diff-block"><h5>{esc(b[0])}</h5><div class="ss-note">{esc(b[2])}</div>'
              + render_tokens(b[1]) + findings_html(b[3]) + "</div>")
    line = verdict(r["token_ids"], b[1].get("token_ids") or [], (r["reference"] or {}).get("token_ids"),
                   backend.tokenizer)
    return (*a, side_b, f'<div class="ss-note">{esc(line)}</div>'
            + char_diff_html(r["text"], b[1].get("text"), names=("A", "B")))


def _audit(backend, url, name, ids, replay, max_tokens) -> dict:
    from specdec_core.audit import audit

    folder = getattr(backend.edge, "name_or_path", None)
    return audit(backend, url, [(name, ids)], replay={"ngram": "ngram", REPLAY[2]: folder}.get(replay),
                 max_tokens=max_tokens)


def _numbers(rep, trace=None) -> str:
    """A side's key numbers: tokens, steps (an engine) or cloud calls (ours), mean acceptance length."""
    if trace is not None:
        m = trace.get("metrics") or {}
        return (f"{m.get('new_tokens', 0)} tokens · {m.get('cloud_calls', 0)} cloud calls · mean "
                f"acceptance length {m.get('mean_accepted_length') or 1.0:.2f}")
    r = rep["results"][0]
    spec = r["metrics"]["speculative_decoding"]
    if spec:
        nums = (f"{spec.get('num_spec_steps', 0)} steps · mean acceptance length "
                f"{spec.get('mean_acceptance_length', 1.0):.2f}")
    else:    # one clear line: the output is still compared, acceptance cannot be
        nums = ("no speculative decoding on this server" if rep["engine"]["speculates"] is False
                else "no speculative metrics from this server") + ": output compared, acceptance not"
    return (f"{len(r['token_ids'])} tokens · {nums} · "
            + ("same as the reference" if (r["reference"] or {}).get("matches") else "differs from the reference"))


def verdict(a: list[int], b: list[int], ref: list[int] | None, tokenizer) -> str:
    """Same output, or the first token where A and B differ and which side the reference has there."""
    i = common_prefix(a, b)
    if a == b:
        return f"Same output: A and B give the same {len(a)} tokens."

    def word(ids):
        return repr(tokenizer.decode(ids[i:i + 1])) if i < len(ids) else "the end"
    line = f"A and B first differ at token {i}: A {word(a)}, B {word(b)}"
    if ref and i < len(ref):
        has = [s for s, ids in (("A", a), ("B", b)) if i < len(ids) and ids[i] == ref[i]]
        line += f"; the reference has {word(ref)} there: " + (f"{has[0]} matches it" if has else "neither matches it")
    return line + "."
