"""The Live tab: one clip, every knob, the streamed coloured trace and its numbers."""
from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlencode

import gradio as gr

from components.findings import findings_html, findings_summary
from components.compare import vs_cloud_html
from components.status import finished_status, prompt_info_md, status_html
from components.timing_plot import timing_figure
from components.tree_view import picked_tree, render_tree
from components.token_view import COLOURINGS
from components.pair_panel import pair_panel_html
from components.formatting import ended_by_words
from components.config_panel import (LINK_KNOBS, SPECS_BY_NAME, checked_for_widgets, config_to_query, inactive,
                                     query_to_config)
from specdec_core.api import with_cloud
from specdec_core.backends import available_backends
from specdec_core.evaluation.bench.speedup import speedup_words
from specdec_core.backends.cloud_policy import NONE
from specdec_core.pairs import backend_report
from specdec_core.decoding.config import DecodeConfig
from specdec_core.errors import ConfigError

from . import common, limits
from .cloud import checked_cloud_url, cloud_url_widget
from .knobs import KnobPanel, greyed
from .runs import Run, side_speedups, time_repeats
from .served import ServedPanel
from .views import TraceView
from .gpu import gpu

# Warnings that arrive while decoding go to the list under the trace and are counted in the
# status line, never into toasts: a toast would cover that list and cut its text.
DEMO_NOTE = ("The **demo** pair hears the clip's *prosody* only (pitch, energy, speech rate, pauses), "
             "not its words: a flat voice saying “happy” reads as calm.")

SHARE_JS = """(q) => { const u = new URL(window.location.href); u.search = q ? '?' + q : '';
  u.hash = ''; return u.toString(); }"""


def colour_radio(elem_id: str):
    """The token colouring toggle: placed before a token panel, it recolours it by CSS alone."""
    return gr.Radio(list(COLOURINGS), value=COLOURINGS[0], label="colour tokens by",
                    elem_id=elem_id, elem_classes="ss-colour-radio", container=False,
                    interactive=True)


class LiveTab:
    def __init__(self):
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=330, elem_classes="ss-side"):
                gr.Markdown("### Clip", elem_classes="ss-h")
                self.sample = gr.Dropdown(common.sample_choices(), value=common.DEFAULT_SAMPLE,
                                          label="sample clip", info="bundled clips, by name", elem_id="live-sample")
                with gr.Row():
                    self.run_btn = gr.Button("▶ Run", variant="primary", elem_id="live-run", scale=2,
                                             min_width=90)
                    self.stop_btn = gr.Button("■ Stop", variant="stop", elem_id="live-stop", scale=1,
                                              min_width=70)
                self.audio = gr.Audio(sources=["upload", "microphone"], type="filepath",
                                      label="or upload / record a clip (WAV, FLAC, OGG)",
                                      value=str(common.sample_path(common.DEFAULT_SAMPLE)), elem_id="live-audio")
                self.demo_note = gr.Markdown(DEMO_NOTE, elem_classes="ss-note", elem_id="live-demo-note")
                with gr.Row():
                    self.backend = gr.Dropdown(available_backends(), value="demo", label="backend",
                                               min_width=100)
                    spec = SPECS_BY_NAME["prompt_type"]
                    self.prompt_type = gr.Radio(list(spec.choices), value=spec.default,
                                                label="prompt type", info="detailed 30–70 汉字 · concise 8–16")
                self.cloud_url = cloud_url_widget()   # the operator's policy: ui/cloud.py
                self.baseline = gr.Checkbox(value=False, label="compare with cloud-only",
                                            info="also decode with the cloud model alone (greedy): speed-up and text diff")
                gr.Markdown("### Knobs", elem_classes="ss-h")
                self.panel = KnobPanel(prompt_type_widget=self.prompt_type, id_prefix="live")
                self._export_widgets()
            with gr.Column(scale=3, min_width=560):
                self.status = gr.HTML(status_html("idle", "Press ▶ Run to decode the clip on the left (or pick another)."),
                                      elem_id="live-status", js_on_load=None)
                self.colour = colour_radio("live-colour")   # issue 28: recolours in the browser
                self.pair = gr.HTML(pair_panel_html(*backend_report("demo")), elem_id="live-pair")
                self.view = TraceView(after_text=self._vs_cloud_widgets)
                self.timing = gr.Plot(timing_figure(None), show_label=False, elem_id="live-timing")
                with gr.Accordion("Token tree of a round (draft tree = static | dynamic)", open=True):
                    self.tree_round = gr.Number(None, label="round", precision=0,
                                                elem_id="live-tree-round")
                    self.tree = gr.HTML(render_tree(None, None), elem_id="live-tree", js_on_load=None)
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3):
                        gr.Markdown("### Diagnostics", elem_classes="ss-h")
                        self.diagnostics = gr.HTML(findings_html(None), elem_id="live-diagnostics",
                                                   js_on_load=None)
                    with gr.Column(scale=2):
                        with gr.Accordion("What the backend read from the clip", open=False):
                            self.info = gr.Markdown(prompt_info_md(None), elem_classes="ss-info",
                                                    elem_id="live-info")
                self.served = ServedPanel(self)     # a served engine as the source (issue 49)
        self._wire()

    def _export_widgets(self):
        """Downloads, the config as JSON, and the share link (with its note)."""
        with gr.Accordion("Export & share", open=False):
            with gr.Row():
                self.dl_trace = gr.DownloadButton("trace JSON", visible=False, size="sm")
                self.dl_results = gr.DownloadButton("results JSON", visible=False, size="sm")
            self.config_json = gr.Code(language="json", label="config JSON", interactive=True,
                                       lines=6, elem_id="live-config-json")
            with gr.Row():
                self.to_json_btn = gr.Button("knobs → JSON", size="sm")
                self.from_json_btn = gr.Button("JSON → knobs", size="sm")
            self.share_btn = gr.Button("make share link", size="sm")
            self.query = gr.Textbox(visible=False)
            self.share_link = gr.Textbox(label="share link (opens the page with these knobs)",
                                         buttons=["copy"], interactive=False,
                                         elem_id="live-share-link")
            self.share_note = gr.Markdown("", elem_classes="ss-note", elem_id="live-share-note")

    def _vs_cloud_widgets(self):
        """Under the final text: speed-up and text diff against cloud-only, and the cloud-only text."""
        self.vs_cloud = gr.HTML("", visible=False, elem_id="live-vs-cloud", js_on_load=None)
        self.baseline_text = gr.Textbox(label="cloud-only text", lines=2, interactive=False,
                                        visible=False, buttons=["copy"], elem_id="live-baseline-text")

    # ------------------------------------------------------------------ wiring
    @property
    def outputs(self) -> list:
        return [self.status, *self.view.outputs, self.baseline_text, self.diagnostics, self.info,
                self.dl_trace, self.dl_results, self.timing, self.vs_cloud]

    def _wire(self):
        ins = [self.sample, self.audio, self.backend, self.baseline, self.cloud_url, *self.panel.inputs]
        self.run_btn.click(limits.waiting_status, None, self.status, queue=False,   # issue 37
                           api_visibility="private", show_progress="hidden")
        self.run_event = self.run_btn.click(
            gpu(self.run), ins, self.outputs, api_visibility="undocumented", api_name="live_run", concurrency_id="decode",
            concurrency_limit=limits.ADMIT, trigger_mode="once", show_progress="hidden")
        self.run_event.then(show_tree, [self.tree_round, self.dl_trace], [self.tree_round, self.tree],
                            api_visibility="private")
        self.tree_round.submit(show_tree, [self.tree_round, self.dl_trace], [self.tree_round, self.tree],
                               queue=False, api_visibility="private")
        for ev in (self.backend.change, self.run_event.then):   # the pair check's panel
            ev(lambda b: pair_panel_html(*backend_report(b)), self.backend, self.pair, api_visibility="private")
        self.stop_btn.click(common.stopper("round"), None, None, queue=False, api_visibility="undocumented",
                            api_name="live_stop")
        wire_clip(self.sample, self.audio, self.status)
        self.cloud_url.change(link_knobs, self.cloud_url,
                              [self.panel.widgets[n] for n in LINK_KNOBS], queue=False, api_visibility="private")
        self.backend.change(lambda b: gr.update(visible=b == "demo"), self.backend, self.demo_note,
                            queue=False, api_visibility="private")
        self.baseline.change(lambda on: (gr.update(visible=on),) * 2, self.baseline,
                             [self.baseline_text, self.vs_cloud], queue=False, api_visibility="private")
        self.to_json_btn.click(self.knobs_to_json, self.panel.inputs, self.config_json, queue=False,
                               api_visibility="private")
        self.from_json_btn.click(self.json_to_knobs, [self.config_json, *self.panel.inputs],
                                 self.panel.inputs, queue=False, api_visibility="private")
        self.share_btn.click(self.share_query, [self.sample, self.audio, self.baseline, *self.panel.inputs],
                             [self.query, self.share_note], queue=False, api_visibility="private").then(
            None, self.query, self.share_link, js=SHARE_JS, api_visibility="private")

    @property
    def load_outputs(self) -> list:
        """What a share link sets on load: the knobs, the sample, and the status line saying so."""
        return [*self.panel.inputs, self.sample, self.baseline, self.status]

    def on_load(self, request: gr.Request):
        """Share links: knobs and sample from the query string; the status line says what the link set."""
        params = dict(getattr(request, "query_params", {}) or {})
        n = len(self.panel.inputs)
        if not params:
            return [gr.skip()] * (n + 3)
        try:
            cfg = checked_for_widgets(query_to_config(urlencode(params)))
        except ConfigError as e:
            gr.Warning(common.toast_text(f"share link ignored: {e}"))
            return [gr.skip()] * (n + 3)
        sample, cloud_only = params.get("sample"), params.get(CLOUD_ONLY) == "1"
        sample_up = gr.update(value=sample) if sample in common.sample_names() else gr.skip()
        return [*self.panel.updates_for(cfg), sample_up, gr.update(value=True) if cloud_only else gr.skip(),
                shared_status(cfg, sample, cloud_only)]

    # ------------------------------------------------------------------ handlers
    def knobs_to_json(self, *values):
        cfg = self.panel.to_config(values)
        try:
            return DecodeConfig.from_dict(cfg).to_json(indent=1)
        except ConfigError as e:
            gr.Warning(common.toast_text(str(e)))
            return json.dumps(cfg, ensure_ascii=False, indent=1)

    def json_to_knobs(self, text, *values):
        try:
            cfg = checked_for_widgets(DecodeConfig.from_json(text or "{}").to_dict())
        except ConfigError as e:
            gr.Warning(common.toast_text(f"config JSON not applied: {e}"))
            return [gr.skip()] * len(self.panel.inputs)
        return self.panel.updates_for(cfg)

    def share_query(self, sample, audio, baseline_on, *values):
        """The link's query, and a note when an uploaded clip (which stays here) is left out."""
        cfg = self.panel.to_config(values)
        try:
            DecodeConfig.from_dict(cfg)
        except ConfigError as e:
            gr.Warning(common.toast_text(f"fix the knobs first: {e}"))
        q = config_to_query(cfg)
        extra = {k: v for k, v in (("sample", sample), (CLOUD_ONLY, "1" if baseline_on else "")) if v}
        if extra:
            q = (q + "&" if q else "") + urlencode(extra)
        note = "" if sample or not audio else UPLOAD_NOT_SHARED
        return q, note

    def _pack(self, status=None, view=None, baseline=None, diagnostics=None, info=None,
              dl_trace=None, dl_results=None, timing=None, vs_cloud=None):
        """The outputs in order; None leaves an output as it is."""
        sk = gr.skip()
        return [sk if status is None else status, *(view or [sk] * len(self.view.outputs)),
                *[sk if v is None else v
                  for v in (baseline, diagnostics, info, dl_trace, dl_results, timing, vs_cloud)]]

    def run(self, request: gr.Request, sample, audio, backend_name, baseline_on, cloud_url, *knobs):
        try:
            cfg = DecodeConfig.from_dict(self.panel.to_config(knobs))
        except ConfigError as e:
            yield self._failed(e, "Invalid knobs")
            return
        hidden = gr.update(visible=False)
        yield self._pack(status_html("run", "Reading the clip…"), self.view.reset(),
                         "", findings_html(None), None, hidden, hidden, vs_cloud="")
        try:
            cloud_url = checked_cloud_url(cloud_url)      # refused here, before any connection
            src, name = common.resolve_audio(sample, audio)
            if cloud_url:
                yield self._pack(status_html("run", "Connecting to the cloud server…", cloud_url))
            backend = with_cloud(common.get_backend(backend_name), cloud_url, cfg)
            run = Run(backend, src, cfg, common.session_of(request), name)
            ctx = common.run_context(backend, cloud_url, run.cfg)
            live = yield from self._stream(run, name, ctx)
            yield from self._finish(run, live, name, ctx, baseline_on)
        except Exception as e:  # noqa: BLE001 - the page must stay usable; bugs are logged
            yield self._failed(e)

    def _stream(self, run, name, ctx):
        """The decode's partial traces, painted as the clock allows; returns the last one."""
        for live, _new in run:
            if live.done:
                break
            if live.n_tokens and run.clock.due("tokens"):
                n_warn = len(live.trace.get("warnings") or [])
                yield self._pack(status_html("run", f"Decoding {name}…",
                                             f"{live.n_tokens} tokens · round {len(live.trace['rounds'])}"
                                             + (f" · ⚠ {n_warn} warning(s), listed under the trace"
                                                if n_warn else ""), ctx),
                                 self.view.values(live, run.cfg.prompt_type, clock=run.clock))
        return live

    def _finish(self, run, live, name, ctx, baseline_on):
        """The cloud-only baseline (when asked for) and the finished page."""
        base, sp, vs = "", None, ""
        if baseline_on and not run.stopped:
            yield self._pack(status_html("run", "Decoding with the cloud alone (cloud-only)…", "", ctx),
                             self.view.values(live, run.cfg.prompt_type, clock=run.clock))
            bl = run.run_baseline()
            yield self._pack(status_html("run", "Timing: this decode and cloud-only, 3 quiet repeats each, "
                                         "interleaved…", "", ctx))
            base, sp = bl["text"], side_speedups([run], [bl], time_repeats([run], run.session, [bl]))[0]
            vs = vs_cloud_html(live.trace.get("text"), base, sp)
        tr = live.trace
        kind, head = finished_status(name, run.stopped, tr.get("diagnostics"))
        stem = f"{name.rsplit('.', 1)[0]}"
        yield self._pack(
            status_html(kind, head, finished_detail(tr, run.cfg, run.baseline, sp), ctx),
            self.view.values(live, run.cfg.prompt_type, plots=True, speedup=sp),
            base, run.findings_html(),
            prompt_info_md(tr.get("info")),
            gr.update(value=common.write_json(f"trace-{stem}", tr), visible=True),
            gr.update(value=common.write_json(f"results-{stem}", run.results_file_obj()), visible=True),
            timing_figure(tr), vs)

    def _failed(self, e: Exception, head: str = "Could not run") -> list:
        """A failed run: its one-line reason, and every output cleared (plots included)."""
        msg = common.failure(e, toast=True)
        hidden = gr.update(visible=False)
        return self._pack(status_html("err", head, msg), self.view.cleared(), "",
                          findings_html(None), prompt_info_md(None), hidden, hidden, timing_figure(None), "")


def finished_detail(tr: dict, cfg, baseline: dict | None, sp: dict | None) -> str:
    """Finished detail: tokens, wall time, what ended it, the cloud-only comparison, the findings."""
    m = tr.get("metrics") or {}
    ended = tr.get("ended_by")
    detail = (f"{m.get('new_tokens', len(tr['tokens']))} tokens in {m.get('wall_s', 0):.2f} s wall time · "
              f"ended by {ended_by_words(ended)}" + (f" ({cfg.time_limit_s:g} s)" if ended == "time_limit" else ""))
    if baseline is not None:
        same = baseline["token_ids"] == tr.get("token_ids")
        fd = baseline.get("first_divergence")
        detail += " · " + ("same tokens as cloud-only" if same else "differs from cloud-only"
                           + (f" at token {fd['index']} ({fd['cause']})" if fd else ""))
        if sp:   # a busy machine's one line is under the final text
            detail += " · " + ("speed-up not timed: the machine is busy" if sp["verdict"] == "busy" else speedup_words(sp))
    return detail + findings_summary(tr.get("diagnostics"))


UPLOAD_NOT_SHARED = ("⚠ An uploaded or recorded clip cannot be shared: this link carries the knobs "
                     "only and opens with the default sample clip.")


CLOUD_ONLY = "cloud_only"   # the share link's "compare with cloud-only" (not a knob: the page's own)


def shared_status(cfg: dict, sample: str | None, cloud_only: bool = False) -> str:
    """Status of a page opened from a share link: the clip, the knobs it changed, a badge per fault."""
    changed = [f"{SPECS_BY_NAME[k].label} {v}" for k, v in parse_qsl(config_to_query(cfg))
               if k not in ("faults", "prompt_type")]
    detail = (("knobs from the link: " + ", ".join(changed)) if changed else "default knobs") + (
        " · compare with cloud-only on" if cloud_only else "")
    ctx = [("fault", f) for f in cfg.get("faults") or []]
    clip = f" on {sample}" if sample in common.sample_names() else ""
    return status_html("idle", f"Opened from a share link{clip}: press Run.", detail, ctx)


def link_knobs(url) -> list:
    """The link model's knobs greyed while a cloud server is picked (its link is measured)."""
    why = inactive({}, remote=bool(url) and url != NONE)
    return [greyed(n, why.get(n)) for n in LINK_KNOBS]


def show_tree(rnd, trace_file):
    """The last run's tree of the picked round, else its first round with a tree."""
    try:
        with open(trace_file, encoding="utf-8") as f:
            trace = json.load(f)
    except (OSError, TypeError, ValueError):
        return gr.skip(), render_tree(None, None)
    return picked_tree(trace, rnd)


def wire_clip(sample, audio, status) -> None:
    """A clip picker's events (Live, A/B): a sample previews; an upload or a recording clears the sample."""
    private = dict(queue=False, api_visibility="private")
    sample.input(lambda n: str(common.sample_path(n)) if n else gr.skip(), sample, audio, **private)
    for ev in (audio.upload, audio.stop_recording):
        ev(lambda: None, None, sample, **private)
    audio.upload(check_upload_status, audio, status, **private)


def check_upload_status(path):
    """At upload time: a file that is not usable audio gets its one-line reason now, not at Run."""
    msg = common.check_upload(path)
    if msg is None:
        return gr.skip()
    gr.Warning(common.toast_text(msg))
    return status_html("err", "Not a usable clip", msg)

