"""The A/B tab: two knob panels, one clip, both runs streamed side by side, then the metric
diff table, the character diff and the cloud-only reference."""
from __future__ import annotations

import traceback

import gradio as gr

from specdec_core.decoding.reference import same_reference

from components.compare import char_diff_html, metric_diff_table
from components.config_panel import SPECS_BY_NAME
from specdec_core.decoding.config import DecodeConfig
from specdec_core.errors import ConfigError, UserError
from specdec_core.decoding.faults import FAULTS

from . import common
from .knobs import KnobPanel
from .runs import Run
from components.status import status_html

from .views import TraceView
from .gpu import gpu

NO_FAULT = "—"


class ABTab:
    def __init__(self, live):
        self.live = live
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=320):
                self.sample = gr.Dropdown(common.sample_choices(), value=live.sample.value,
                                          label="sample clip (both sides)")
                self.audio = gr.Audio(sources=["upload", "microphone"], type="filepath",
                                      label="or upload / record a clip")
            with gr.Column(scale=2, min_width=320):
                with gr.Row():
                    self.backend = gr.Dropdown(common.backend_choices(), value="demo", label="backend")
                    spec = SPECS_BY_NAME["prompt_type"]
                    self.prompt_type = gr.Radio(list(spec.choices), value=spec.default,
                                                label="prompt type (both sides)")
                self.reference = gr.Checkbox(value=True, label="cloud-only reference",
                                             info="decode with the cloud model alone as well")
            with gr.Column(scale=2, min_width=320):
                self.fault_vs_fixed = gr.Dropdown(
                    [NO_FAULT] + list(FAULTS), value=NO_FAULT, elem_id="ab-fault",
                    label="one click: fixed (A) vs fault (B)",
                    info="B becomes A plus this fault, and the pair runs")
                with gr.Row():
                    self.copy_btn = gr.Button("copy A → B", size="sm", elem_id="ab-copy")
                    self.swap_btn = gr.Button("swap A ↔ B", size="sm")
                with gr.Row():
                    self.run_btn = gr.Button("▶ Run A and B", variant="primary", elem_id="ab-run", scale=2)
                    self.stop_btn = gr.Button("■ Stop", variant="stop", scale=1)
        with gr.Accordion("Configurations", open=True):
            with gr.Row(equal_height=False):
                with gr.Column(elem_classes="ss-ab-a"):
                    gr.Markdown("#### A", elem_classes="ss-ab-head")
                    self.panel_a = KnobPanel("A", prompt_type_widget=self.prompt_type, open_first=False)
                with gr.Column(elem_classes="ss-ab-b"):
                    gr.Markdown("#### B", elem_classes="ss-ab-head")
                    self.panel_b = KnobPanel("B", prompt_type_widget=self.prompt_type, open_first=False)
        self.status = gr.HTML(status_html("idle", "Set A and B, pick a clip, press Run A and B."),
                              elem_id="ab-status", js_on_load=None)
        with gr.Row(equal_height=False):
            with gr.Column(elem_id="ab-side-a"):
                gr.Markdown("#### A", elem_classes="ss-ab-head")
                self.view_a = TraceView("A", compact=True)
            with gr.Column(elem_id="ab-side-b"):
                gr.Markdown("#### B", elem_classes="ss-ab-head")
                self.view_b = TraceView("B", compact=True)
        self.ref_text = gr.Textbox(label="cloud-only reference text", interactive=False, lines=2,
                                   buttons=["copy"])
        with gr.Row(equal_height=False):
            with gr.Column(scale=3):
                self.diff = gr.Dataframe(metric_diff_table(None, None), label="metrics: A vs B "
                                         "(delta = B − A; better = the side that wins where a metric "
                                         "has a direction)", interactive=False, elem_id="ab-diff",
                                         max_height=520, column_widths=["34%", "19%", "19%", "16%", "12%"])
            with gr.Column(scale=2):
                gr.Markdown("#### Text difference", elem_classes="ss-h")
                self.char_diff = gr.HTML(char_diff_html("", ""), elem_id="ab-char-diff", js_on_load=None)
        self._wire()

    @property
    def outputs(self):
        return [self.status, *self.view_a.outputs, *self.view_b.outputs, self.ref_text, self.diff,
                self.char_diff]

    def _wire(self):
        a, b = self.panel_a, self.panel_b
        ins = [self.sample, self.audio, self.backend, self.reference, *a.inputs, *b.inputs]
        run_kw = dict(api_visibility="private", concurrency_id="decode", concurrency_limit=2,
                      trigger_mode="once", show_progress="hidden")
        self.run_btn.click(gpu(self.run), ins, self.outputs, api_name="ab_run", **run_kw)
        self.stop_btn.click(_stop, None, None, queue=False, api_visibility="private")
        self.copy_btn.click(lambda *v: b.updates_for(a.to_config(v)), a.inputs, b.inputs, queue=False,
                            api_visibility="private")
        self.swap_btn.click(self.swap, [*a.inputs, *b.inputs], [*a.inputs, *b.inputs], queue=False,
                            api_visibility="private")
        self.fault_vs_fixed.input(self.set_fault, [self.fault_vs_fixed, *a.inputs], b.inputs,
                                  queue=False, api_visibility="private").then(
            self.run, ins, self.outputs, api_name="ab_fault_run", **run_kw)
        self.sample.input(lambda n: (str(common.sample_path(n)) if n else gr.skip(),
                                     common.sample_prompt_type(n) or gr.skip()),
                          self.sample, [self.audio, self.prompt_type], queue=False,
                          api_visibility="private")
        for ev in (self.audio.upload, self.audio.stop_recording):
            ev(lambda: None, None, self.sample, queue=False, api_visibility="private")

    def swap(self, *values):
        n = len(self.panel_a.inputs)
        ca, cb = self.panel_a.to_config(values[:n]), self.panel_b.to_config(values[n:])
        return [*self.panel_a.updates_for(cb), *self.panel_b.updates_for(ca)]

    def set_fault(self, fault, *values):
        if not fault or fault == NO_FAULT:
            return [gr.skip()] * len(self.panel_b.inputs)
        cfg = self.panel_a.to_config(values)
        cfg["faults"] = [fault]
        return self.panel_b.updates_for(cfg)

    def _configs(self, values):
        n = len(self.panel_a.inputs)
        out = []
        for side, panel, vals in (("A", self.panel_a, values[:n]), ("B", self.panel_b, values[n:])):
            try:
                out.append(DecodeConfig.from_dict(panel.to_config(vals)))
            except ConfigError as e:
                raise ConfigError(f"config {side}: {e}") from None
        return out

    def run(self, request: gr.Request, sample, audio, backend_name, reference_on, *values):
        sk = gr.skip()
        n_view = len(self.view_a.outputs)

        def pack(status, va=None, vb=None, ref=sk, diff=sk, cdiff=sk):
            return [status, *(va or [sk] * n_view), *(vb or [sk] * n_view), ref, diff, cdiff]

        try:
            cfg_a, cfg_b = self._configs(values)
            src, name = common.resolve_audio(sample, audio)
            backend = common.get_backend(backend_name)
            session = common.session_of(request)
            runs = [Run(backend, src, cfg_a, session, name), Run(backend, src, cfg_b, session, name)]
            cfg_a, cfg_b = runs[0].cfg, runs[1].cfg
            views = [self.view_a, self.view_b]
            yield pack(status_html("run", f"Decoding {name} with A and B…"), self.view_a.reset(),
                       self.view_b.reset(), "", metric_diff_table(None, None), char_diff_html("", ""))
            # Interleave the two decodes round by round so both stream side by side.
            iters, done = [iter(r) for r in runs], [False, False]
            while not all(done):
                for i in (0, 1):
                    if not done[i]:
                        live, _ = next(iters[i], (runs[i].live, None))
                        done[i] = live.done
                if runs[0].clock.tokens_due():   # one clock paces the pair's token views
                    lives = [r.live for r in runs]
                    yield pack(status_html("run", f"Decoding {name} with A and B…",
                                           f"A {lives[0].n_tokens} tokens · B {lives[1].n_tokens} tokens"),
                               views[0].values(lives[0], cfg_a.prompt_type, clock=runs[0].clock),
                               views[1].values(lives[1], cfg_b.prompt_type, clock=runs[1].clock))
            ref = ""
            stopped = runs[0].stopped or runs[1].stopped
            if reference_on and not stopped:
                yield pack(status_html("run", "Running the cloud-only reference…"))
                ref = runs[0].run_baseline()["text"]
                if same_reference(cfg_a, cfg_b):      # B's divergence verdict, same reference
                    runs[1].run_baseline(runs[0].reference)
            ta, tb = runs[0].live.trace, runs[1].live.trace
            detail = (f"A: {len(ta['tokens'])} tokens, ended by {ta.get('ended_by')} · "
                      f"B: {len(tb['tokens'])} tokens, ended by {tb.get('ended_by')}")
            yield pack(status_html("err" if stopped else "ok", ("Stopped: " if stopped else "Done: ") + name,
                                   detail),
                       views[0].values(runs[0].live, cfg_a.prompt_type, plots=True),
                       views[1].values(runs[1].live, cfg_b.prompt_type, plots=True),
                       ref, metric_diff_table(ta.get("metrics"), tb.get("metrics")),
                       char_diff_html(ta.get("text"), tb.get("text")))
        except Exception as e:  # noqa: BLE001 - keep the page usable
            if not isinstance(e, UserError):
                traceback.print_exc()
            msg = common.user_message(e)
            gr.Warning(msg)
            yield pack(status_html("err", "Could not run", msg))


def _stop(request: gr.Request):
    if common.cancel_session(common.session_of(request)):
        gr.Info("stopping after the current round")
