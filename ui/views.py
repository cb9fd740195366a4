"""Output panels shared by the Live tab and both sides of the A/B tab."""
from __future__ import annotations

import html
import time

import gradio as gr

from components.cards import diagnostics_html, metric_cards, warnings_html
from components.plots import accepted_length_figure, entropy_figure, position_acceptance_figure
from components.token_view import render_tokens

# Minimum seconds between streamed updates of the token view and of the plots: the page
# re-renders the whole HTML on each update, so a few per second is the useful rate.
TOKEN_EVERY = 0.1
PLOT_EVERY = 1.5


def status_html(kind: str, text: str, detail: str = "") -> str:
    """kind: idle | run | ok | err."""
    icon = {"idle": "●", "run": "◌", "ok": "✔", "err": "✖"}.get(kind, "●")
    d = f'<span class="ss-status-detail">{html.escape(detail)}</span>' if detail else ""
    return (f'<div class="ss-status ss-status-{kind}" data-state="{kind}"><span class="ss-status-icon">'
            f'{icon}</span><span class="ss-status-text">{html.escape(text)}</span>{d}</div>')


def prompt_info_md(info: dict | None) -> str:
    info = info or {}
    parts = []
    if info.get("prosody_text"):
        parts.append(f"**Prosody read from the clip:** {info['prosody_text']}")
    if info.get("condition_tokens"):
        parts.append("**Condition tokens:** " + " ".join(f"`{t}`" for t in info["condition_tokens"]))
    audio = info.get("audio") or {}
    if audio:
        bits = [f"{audio.get('duration_s')} s", f"{audio.get('source_sr')} Hz", f"{audio.get('channels')} ch"]
        if audio.get("silent"):
            bits.append("**silent**")
        parts.append("**Audio:** " + ", ".join(str(b) for b in bits))
        for w in audio.get("warnings") or []:
            parts.append(f"⚠ {w}")
    if info.get("prompt"):
        parts.append("**Prompt:**\n```\n" + str(info["prompt"]) + "\n```")
    return "\n\n".join(parts) or "_Run a clip to see what the backend read from it._"


class TraceView:
    """Token view, warnings, text, cards and plots of one run."""

    def __init__(self, side: str = "", compact: bool = False):
        suffix = f" {side}" if side else ""
        self.tokens = gr.HTML(render_tokens(None), elem_classes="ss-panel ss-tokens-panel",
                              js_on_load=None)
        self.warnings = gr.HTML(warnings_html(None), elem_classes="ss-warnings-panel", js_on_load=None)
        self.text = gr.Textbox(label="final text" + suffix, lines=2, interactive=False,
                               buttons=["copy"])
        self.cards = gr.HTML(metric_cards(None), elem_classes="ss-cards-panel", js_on_load=None)
        if compact:
            self.entropy = gr.Plot(entropy_figure(None), show_label=False)
            self.acclen = gr.Plot(accepted_length_figure(None), show_label=False)
            self.position = None
        else:
            self.entropy = gr.Plot(entropy_figure(None), show_label=False)
            with gr.Row(equal_height=True):
                self.acclen = gr.Plot(accepted_length_figure(None), show_label=False)
                self.position = gr.Plot(position_acceptance_figure(None), show_label=False)
        self._last_tok = self._last_plot = 0.0

    @property
    def outputs(self) -> list:
        outs = [self.tokens, self.warnings, self.text, self.cards, self.entropy, self.acclen]
        return outs + ([self.position] if self.position is not None else [])

    def reset(self) -> list:
        """Clear the text panels for a new run. The plots keep the previous run until the first
        plot update: serialising three figures here would delay the first painted token."""
        self._last_tok = 0.0
        self._last_plot = time.perf_counter()
        n_figs = 2 if self.position is None else 3
        return [render_tokens(None, live=True), warnings_html(None), "", metric_cards(None),
                *[gr.skip()] * n_figs]

    def due(self, live, force: bool = False) -> bool:
        """Whether enough time passed since the last token-view update to send another."""
        now = time.perf_counter()
        if force or live.done or now - self._last_tok >= TOKEN_EVERY or self._last_tok == 0.0:
            self._last_tok = now
            return True
        return False

    def values(self, live, prompt_type: str | None = None, plots: bool | None = None) -> list:
        """Output values for the current partial (or final) trace."""
        tr = live.trace
        done = live.done
        if plots is None:
            now = time.perf_counter()
            plots = done or now - self._last_plot >= PLOT_EVERY
        if plots:
            self._last_plot = time.perf_counter()
        text = tr.get("text") if done else live.text()
        outs = [render_tokens(tr, live=not done), warnings_html(tr.get("warnings")), text,
                metric_cards(tr.get("metrics"), prompt_type or (tr.get("config") or {}).get("prompt_type"))
                if done else gr.skip()]
        n_figs = 2 if self.position is None else 3
        if not plots:
            return outs + [gr.skip()] * n_figs
        figs = [entropy_figure(tr), accepted_length_figure(tr)]
        if self.position is not None:
            figs.append(position_acceptance_figure(tr))
        return outs + figs
