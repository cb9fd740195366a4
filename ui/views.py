"""Output panels shared by the Live tab and both A/B sides; the throttle Clock belongs to each run."""
from __future__ import annotations

import time
from contextlib import nullcontext

import gradio as gr

from components.cards import metric_cards, warnings_html
from components.plots import accepted_length_figure, entropy_figure, position_acceptance_figure
from components.token_view import render_tokens

# Minimum seconds between streamed updates of the token view and of the plots: the page
# re-renders the whole HTML on each update, so a few per second is the useful rate.
TOKEN_EVERY = 0.1
PLOT_EVERY = 1.5


class Clock:
    """When one run last sent tokens and plots (per run: runs never throttle each other)."""

    def __init__(self):
        now = time.perf_counter()   # the first tokens go at once; the first plots wait PLOT_EVERY (see reset)
        self.last = {"tokens": now - TOKEN_EVERY, "plots": now}

    def due(self, what: str, done: bool = False) -> bool:
        """Whether "tokens" or "plots" are due again (always once the run is done)."""
        now = time.perf_counter()
        if done or now - self.last[what] >= (TOKEN_EVERY if what == "tokens" else PLOT_EVERY):
            self.last[what] = now
            return True
        return False


class TraceView:
    """Token view, warnings, text, cards and plots of one run."""

    def __init__(self, side: str = "", compact: bool = False, after_text=None):
        """`after_text`: builds the caller's widgets right under the final text (not among `outputs`)."""
        suffix = f" {side}" if side else ""
        self.tokens = gr.HTML(render_tokens(None), elem_classes="ss-panel ss-tokens-panel",
                              js_on_load=None)
        self.warnings = gr.HTML(warnings_html(None), elem_classes="ss-warnings-panel", js_on_load=None)
        self.text = gr.Textbox(label="final text" + suffix, lines=2, interactive=False,
                               buttons=["copy"])
        if after_text is not None:
            after_text()
        self.cards = gr.HTML(metric_cards(None), elem_classes="ss-cards-panel", js_on_load=None)
        # the figures of a run: compact (A/B) draws two, one under the other; Live three
        self.figures = [entropy_figure, accepted_length_figure] + ([] if compact else [position_acceptance_figure])
        self.entropy = gr.Plot(entropy_figure(None), show_label=False)
        with nullcontext() if compact else gr.Row(equal_height=True):
            self.plots = [self.entropy] + [gr.Plot(f(None), show_label=False) for f in self.figures[1:]]

    @property
    def outputs(self) -> list:
        return [self.tokens, self.warnings, self.text, self.cards, *self.plots]

    def reset(self) -> list:
        """Clear the text panels; plots stay until their first update (not to delay the first token)."""
        return [render_tokens(None, live=True), warnings_html(None), "", metric_cards(None),
                *[gr.skip()] * len(self.plots)]

    def cleared(self) -> list:
        """Every output emptied, plots included: nothing of a previous run stays after a failure."""
        return [render_tokens(None), warnings_html(None), "", metric_cards(None), *[f(None) for f in self.figures]]

    def values(self, live, prompt_type: str | None = None, plots: bool | None = None,
               clock: Clock | None = None, speedup: dict | None = None) -> list:
        """Output values of the partial (or final) trace; plots=None: the run's clock decides."""
        tr = live.trace
        done = live.done
        if plots is None:
            plots = clock.due("plots", done) if clock is not None else True
        text = tr.get("text") if done else live.text()
        outs = [render_tokens(tr, live=not done), warnings_html(tr.get("warnings")), text,
                metric_cards(tr.get("metrics"), prompt_type or (tr.get("config") or {}).get("prompt_type"),
                             findings=tr.get("diagnostics"), speedup=speedup)
                if done else gr.skip()]
        return outs + ([f(tr) for f in self.figures] if plots else [gr.skip()] * len(self.plots))
