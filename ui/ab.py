"""The A/B tab: two knob panels, one clip, both runs streamed side by side, then their comparison."""
from __future__ import annotations

import statistics

import gradio as gr

from components.findings import findings_html, findings_summary
from components.formatting import ended_by_words, fault_label
from components.compare import REPEATS, char_diff_html, metric_diff_html, speedup_cell
from specdec_core.evaluation.bench.speedup import BUSY, BUSY_WORDS, busy_factor, busy_words, speedup_words
from specdec_core.evaluation.bench.stats import paired
from specdec_core.backends import available_backends
from specdec_core.decoding.reference import same_reference
from components.config_panel import SPECS_BY_NAME
from specdec_core.decoding.faults import FAULTS

from . import common, limits
from .knobs import KnobPanel
from .runs import Run, side_speedups, time_repeats
from components.status import finished_status, status_html

from .views import TraceView
from .gpu import gpu

NO_FAULT = "—"
# Issue 58: A/B took 84 s for k=2 vs k=6 when cloud-only was timed on every repeat. "auto" times it
# only where one cloud-only decode costs no more than the slower side's decode.
TIME_CLOUD = ("auto", "on", "off")
TIME_CLOUD_INFO = (f"{REPEATS} more cloud-only decodes for a speed-up per side; auto: only when one costs no "
                   "more than a side's decode")


def times_cloud(choice: str, bases: list, runs: list) -> bool:
    """Whether to time cloud-only beside A and B: "on", "off", or "auto" (no slower than a side)."""
    if choice != "auto" or not any(bases):
        return choice == "on" and any(bases)
    cloud = max(b.get("wall_s") or 0.0 for b in bases if b)
    return cloud <= max((r.live.trace.get("metrics") or {}).get("wall_s") or 0.0 for r in runs)


# One click, two configurations: A's knobs with these changes on each side (issue 34: chain vs
# tree; issue 35: the edge model vs the head drafting).
AB_PRESETS = {
    "A: chain vs B: dynamic tree": ({"draft_tree": "chain"}, {"draft_tree": "dynamic"}),
    "A: chain vs B: static tree": ({"draft_tree": "chain"}, {"draft_tree": "static"}),
    "A: edge drafter vs B: head drafter": ({"drafter": "edge"}, {"drafter": "head"}),
    "A: greedy vs B: sampling (T 0.7)": ({"verify": "greedy", "temperature": 0.0},
                                         {"verify": "sampling", "temperature": 0.7}),
}


class ABTab:
    def __init__(self, live):
        self._inputs(live)
        self._configurations()
        self._sides()
        self._comparison()
        self._wire()

    def _inputs(self, live):
        """Clip, backend, prompt type, reference, the fault-vs-fixed shortcut and the buttons."""
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=320):
                self.sample = gr.Dropdown(common.sample_choices(), value=live.sample.value,
                                          label="sample clip (both sides)")
                self.audio = gr.Audio(sources=["upload", "microphone"], type="filepath",
                                      label="or upload / record a clip", elem_id="ab-audio")
            with gr.Column(scale=2, min_width=320):
                with gr.Row():
                    self.backend = gr.Dropdown(available_backends(), value="demo", label="backend")
                    spec = SPECS_BY_NAME["prompt_type"]
                    self.prompt_type = gr.Radio(list(spec.choices), value=spec.default,
                                                label="prompt type (both sides)")
                self.reference = gr.Checkbox(value=True, label="compare with cloud-only",
                                             info="also decode with the cloud model alone (greedy): "
                                                  "speed-up and text diff per side")
                self.time_cloud = gr.Radio(list(TIME_CLOUD), value="auto", label="time cloud-only too",
                                           elem_id="ab-time-cloud", info=TIME_CLOUD_INFO)
            with gr.Column(scale=2, min_width=320):
                self.fault_vs_fixed = gr.Dropdown(
                    [NO_FAULT] + [(fault_label(n), n) for n in FAULTS], value=NO_FAULT, elem_id="ab-fault",
                    label="one click: fault vs fixed (B = A + this fault)",
                    info="B becomes a copy of A's knobs with this fault added; then A and B run")
                self.compare = gr.Dropdown(
                    [NO_FAULT] + list(AB_PRESETS), value=NO_FAULT, elem_id="ab-compare",
                    label="one click: compare two set-ups",
                    info="A and B become A's knobs with these changes; then A and B run")
                with gr.Row():
                    self.copy_btn = gr.Button("copy A → B", size="sm", elem_id="ab-copy")
                    self.swap_btn = gr.Button("swap A ↔ B", size="sm")
                with gr.Row():
                    self.run_btn = gr.Button("▶ Run A and B", variant="primary", elem_id="ab-run", scale=2)
                    self.stop_btn = gr.Button("■ Stop", variant="stop", scale=1)

    def _configurations(self):
        self.panels = []
        with gr.Accordion("Configurations", open=True):
            with gr.Row(equal_height=False):
                for side in "AB":
                    with gr.Column(elem_classes=f"ss-ab-{side.lower()}"):
                        gr.Markdown(f"#### {side}", elem_classes="ss-ab-head")
                        self.panels.append(KnobPanel(side, prompt_type_widget=self.prompt_type, open_first=False))
        self.panel_a, self.panel_b = self.panels

    def _sides(self):
        """The status line, then A and B side by side: tokens, cards, plots and findings."""
        self.status = gr.HTML(status_html("idle", "Set A and B, pick a clip, press Run A and B."),
                              elem_id="ab-status", js_on_load=None)
        self.views, self.diags = [], []
        with gr.Row(equal_height=False, elem_id="ab-sides"):
            for side in "AB":
                with gr.Column(elem_id=f"ab-side-{side.lower()}"):
                    gr.Markdown(f"#### {side}", elem_classes="ss-ab-head")
                    self.views.append(TraceView(side, compact=True))
                    gr.Markdown(f"##### Diagnostics {side}", elem_classes="ss-h")
                    self.diags.append(gr.HTML(findings_html(None), elem_id=f"ab-diag-{side.lower()}",
                                              js_on_load=None))
        self.view_a, self.view_b = self.views

    def _comparison(self):
        """The cloud-only text, the metric table and the text difference."""
        self.ref_text = gr.Textbox(label="cloud-only text", interactive=False, lines=2,
                                   buttons=["copy"])
        with gr.Row(equal_height=False):
            with gr.Column(scale=3):
                gr.Markdown("#### Metrics: A vs B", elem_classes="ss-h")
                gr.Markdown("Hover a metric for its unit and meaning, and a *better* cell for why. "
                            "Fewer cloud calls or a higher acceptance wins only when A and B wrote the "
                            f"same text. Times are the medians of {REPEATS} quiet repeats per side: a time "
                            "wins only beyond their spread, else it is *within noise*.", elem_classes="ss-note")
                self.diff = gr.HTML(metric_diff_html(None, None), elem_id="ab-diff", js_on_load=None)
            with gr.Column(scale=2):
                gr.Markdown("#### Text difference", elem_classes="ss-h")
                self.char_diff = gr.HTML(char_diff_html("", ""), elem_id="ab-char-diff", js_on_load=None)

    @property
    def outputs(self):
        return [self.status, *self.view_a.outputs, *self.view_b.outputs, self.ref_text, self.diff,
                self.char_diff, *self.diags]

    def _wire(self):
        a, b = self.panel_a, self.panel_b
        ins = [self.sample, self.audio, self.backend, self.reference, *a.inputs, *b.inputs, self.time_cloud]
        run_kw = dict(api_visibility="private", concurrency_id="decode", concurrency_limit=limits.ADMIT,
                      trigger_mode="once", show_progress="hidden")
        waiting = dict(fn=limits.waiting_status, inputs=None, outputs=self.status, queue=False,   # issue 37
                       api_visibility="private", show_progress="hidden")
        self.run_btn.click(**waiting)
        self.run_btn.click(gpu(self.run), ins, self.outputs, api_name="ab_run", **run_kw)
        self.stop_btn.click(common.stopper("round"), None, None, queue=False, api_visibility="private")
        self.copy_btn.click(lambda *v: b.updates_for(a.to_config(v)), a.inputs, b.inputs, queue=False,
                            api_visibility="private")
        self.swap_btn.click(self.swap, [*a.inputs, *b.inputs], [*a.inputs, *b.inputs], queue=False,
                            api_visibility="private")
        for pick, fill, outs, name in ((self.fault_vs_fixed, self.set_fault, b.inputs, "ab_fault_run"),
                                       (self.compare, self.set_pair, [*a.inputs, *b.inputs], "ab_compare_run")):
            pick.input(fill, [pick, *a.inputs], outs, queue=False, api_visibility="private").then(
                **waiting).then(gpu(self.run), ins, self.outputs, api_name=name, **run_kw)
        from .live import wire_clip
        wire_clip(self.sample, self.audio, self.status)

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

    def set_pair(self, name, *values):
        """Both panels from A's knobs and the pair preset `name`."""
        if name not in AB_PRESETS:
            return [gr.skip()] * (len(self.panel_a.inputs) + len(self.panel_b.inputs))
        cfg = self.panel_a.to_config(values)
        pa, pb = AB_PRESETS[name]
        return [*self.panel_a.updates_for({**cfg, **pa}), *self.panel_b.updates_for({**cfg, **pb})]

    def _configs(self, values):
        n = len(self.panel_a.inputs)
        knobs = (panel.to_config(vals) for panel, vals in zip(self.panels, (values[:n], values[n:])))
        return list(common.side_configs(zip("AB", knobs)).values())

    def _pack(self, status, views=(None, None), ref=None, diff=None, cdiff=None, diags=(None, None)) -> list:
        """The outputs in order (views and diags: one per side); None leaves an output as it is."""
        sk, out = gr.skip(), [status]
        for vals, view in zip(views, self.views):
            out += vals or [sk] * len(view.outputs)
        return out + [sk if v is None else v for v in (ref, diff, cdiff, *diags)]

    def _cleared(self, status: str, views: list) -> list:
        """`status`, the sides' `views` and every comparison emptied (a new run, a failed one)."""
        return self._pack(status, views, "", metric_diff_html(None, None), char_diff_html("", ""),
                          [findings_html(None)] * 2)

    def run(self, request: gr.Request, sample, audio, backend_name, reference_on, *values):
        try:   # values: A's and B's knobs, then (from the page) the time-cloud-only choice
            n = 2 * len(self.panel_a.inputs)
            values, time_cloud = values[:n], (values[n:] or (None,))[0] or "auto"
            cfg_a, cfg_b = self._configs(values)
            src, name = common.resolve_audio(sample, audio)
            backend = common.get_backend(backend_name)
            session = common.session_of(request)
            runs = [Run(backend, src, cfg_a, session, name), Run(backend, src, cfg_b, session, name)]
            # a badge per fault that is on, per side ('fault: B no_resync')
            ctx = common.run_context(backend, "", None) + [("fault", f"{side} {f}") for side, r in zip("AB", runs)
                                                           for f in r.cfg.faults]
            yield self._cleared(status_html("run", f"Decoding {name} with A and B…", "", ctx),
                                [v.reset() for v in self.views])
            yield from self._stream_pair(runs, name, ctx)
            bases = yield from self._references(runs, reference_on, ctx)
            timed = times_cloud(time_cloud, bases, runs)
            if not (runs[0].stopped or runs[1].stopped):
                yield self._pack(status_html("run", f"Timing A, B{' and cloud-only' if timed else ''}: "
                                             f"{REPEATS} quiet repeats each, interleaved…", "", ctx))
            samples = time_repeats(runs, session, bases if timed else (None, None))
            untimed = UNTIMED_WORDS[time_cloud] if any(bases) and not timed else ""
            yield self._finished(runs, bases, samples, name, ctx, untimed)
        except Exception as e:  # noqa: BLE001 - keep the page usable
            msg = common.failure(e, toast=True)
            yield self._cleared(status_html("err", "Could not run", msg), [v.cleared() for v in self.views])

    def _stream_pair(self, runs, name, ctx):
        """Interleave the two decodes round by round so both stream side by side."""
        iters, done = [iter(r) for r in runs], [False, False]
        while not all(done):
            for i in (0, 1):
                if not done[i]:
                    live, _ = next(iters[i], (runs[i].live, None))
                    done[i] = live.done
            if runs[0].clock.due("tokens"):   # one clock paces the pair's token views
                lives = [r.live for r in runs]
                yield self._pack(status_html("run", f"Decoding {name} with A and B…",
                                             f"A {lives[0].n_tokens} tokens · B {lives[1].n_tokens} tokens", ctx),
                                 [v.values(lv, r.cfg.prompt_type, clock=r.clock)
                                  for v, lv, r in zip(self.views, lives, runs)])

    def _references(self, runs, reference_on, ctx):
        """The cloud-only references: one shared, unless B's stops differ (then B's own)."""
        bases = [None, None]
        if reference_on and not (runs[0].stopped or runs[1].stopped):
            yield self._pack(status_html("run", "Decoding with the cloud alone (cloud-only)…", "", ctx))
            bases[0] = runs[0].run_baseline()
            bases[1] = (runs[1].run_baseline(runs[0].reference) if same_reference(runs[0].cfg, runs[1].cfg)
                        else runs[1].run_baseline())
        return bases

    def _finished(self, runs, bases, samples, name, ctx, untimed: str = "") -> list:
        ta, tb = runs[0].live.trace, runs[1].live.trace
        sps = side_speedups(runs, bases, samples)
        detail = pair_detail(ta, tb, sps, busy_line(sps, samples[0] if samples else None))
        if untimed:
            detail += f" · {untimed}"
        same_text = (ta.get("text") or "") == (tb.get("text") or "")
        stopped = runs[0].stopped or runs[1].stopped
        rows, timings = timing_rows(sps, samples[0] if samples else [None, None])
        if bases[0]:     # whether each side matches its cloud-only reference
            rows.append(("matches_baseline", *(b["token_ids"] == t.get("token_ids") for b, t in zip(bases, (ta, tb)))))
        return self._pack(
            status_html(*finished_status(name, stopped, ta.get("diagnostics"), tb.get("diagnostics")), detail, ctx),
            [v.values(r.live, r.cfg.prompt_type, plots=True, speedup=sp)
             for v, r, sp in zip(self.views, runs, sps)],
            bases[0]["text"] if bases[0] else "",
            metric_diff_html(ta.get("metrics"), tb.get("metrics"), same_text, runs[0].cfg.prompt_type,
                             extra=rows, timings=timings,
                             identical=runs[0].cfg == runs[1].cfg),
            text_diffs_html(ta.get("text"), tb.get("text"), bases),
            [r.findings_html() for r in runs])


UNTIMED_WORDS = {"auto": "cloud-only not timed: one cloud-only decode costs more than a side's "
                         "('time cloud-only too: on' gives the speed-up)",
                 "off": "cloud-only not timed ('time cloud-only too: off'): no speed-up"}


def busy_line(sps: list, decode: list | None) -> str:
    """One line when the repeats cannot time anything now (too noisy, or out of order); else ''."""
    sp = next((sp for sp in sps if sp and sp["verdict"] == "busy"), None)
    if sp:
        return busy_words(sp)
    if decode and all(decode) and busy_factor(*decode) > BUSY:
        return BUSY_WORDS.format(f=busy_factor(*decode))
    return ""


def timing_rows(sps: list, samples: list) -> tuple[list, dict]:
    """The A/B table's speed rows (key, A, B) and the repeats each is judged on."""
    rows, timings = [], {}
    if busy_line(sps, samples):
        return rows, timings       # the status line says once that timing is not possible now
    if all(samples):
        timings["decode_s"] = tuple(samples)
        if all(sps):
            timings["speedup"] = tuple(paired(sp["cloud_samples"], sp["decode_samples"]) for sp in sps)
            timings["cloud_only_s"] = tuple(sp["cloud_samples"] for sp in sps)
        for key, (sa, sb) in timings.items():   # the speed-up as the cards say it: median over median
            rows.append((key, *([speedup_cell(sp) for sp in sps] if key == "speedup" else
                                (statistics.median(sa), statistics.median(sb)))))
    return rows, timings


def pair_detail(ta: dict, tb: dict, sps: list, busy: str = "") -> str:
    """Finished detail per side: tokens, why it ended, speed-up over cloud-only, findings."""
    busy = busy or busy_line(sps, None)
    return " · ".join(f"{side}: {len(t['tokens'])} tokens, ended by {ended_by_words(t.get('ended_by'))}"
                      f"{'' if busy or not sp else ', ' + speedup_words(sp)}"
                      f"{findings_summary(t.get('diagnostics'), ', ', '')}" for side, t, sp in (("A", ta, sps[0]), ("B", tb, sps[1]))
                      ) + (f" · {busy}" if busy else "")


def text_diffs_html(text_a: str | None, text_b: str | None, bases: list) -> str:
    """A vs B, and each side against the cloud-only reference when it ran."""
    parts = ['<div class="ss-diff-block" data-pair="A-B"><h5>A vs B</h5>' + char_diff_html(text_a, text_b) + "</div>"]
    for side, text, base in (("A", text_a, bases[0]), ("B", text_b, bases[1])):
        if base:
            parts.append(f'<div class="ss-diff-block" data-pair="cloud-{side}"><h5>cloud-only vs {side}</h5>'
                         + char_diff_html(base["text"], text, names=("cloud-only", side)) + "</div>")
    return "".join(parts)

