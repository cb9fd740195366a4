"""Plotly figures of a trace (entropy, accepted length, per-position acceptance) and of a batch."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specdec_core.analysis.glossary import term
from specdec_core.analysis.metrics import by_position, drafted_entropies, share_above, threshold_nats

from .formatting import esc, is_number, visible
from .palette import CLOUD_CALL_COLOR, NEUTRAL_COLOR, SOURCE_COLORS, SOURCE_LABELS

HEIGHT = 290
_FROM_CONFIG = "config"


def figure(title: str, x_title: str, y_title: str) -> go.Figure:
    """A new figure in the page's one set-up: its title, axis titles and the legend under the axis."""
    return go.Figure(layout=dict(
        template="plotly_white",
        title=dict(text=title, font=dict(size=14), x=0.01, xanchor="left"),
        height=HEIGHT,
        margin=dict(l=50, r=16, t=40, b=78),
        # below the axis: on half-width panels a wrapped legend above the plot covers the title
        legend=dict(orientation="h", yanchor="top", y=-0.3, xanchor="left", x=0, font=dict(size=11)),
        xaxis_title=x_title,
        yaxis_title=y_title,
        hoverlabel=dict(font_size=12),
    ))


def _empty(fig: go.Figure, message: str) -> go.Figure:
    fig.add_annotation(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5,
                       font=dict(color=NEUTRAL_COLOR, size=13))
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False)
    return fig


def _threshold_of(trace: dict, threshold):
    """Nats: the run's resolved threshold (trace info, else a nats config) or the one given."""
    if threshold == _FROM_CONFIG:
        return threshold_nats(trace)
    if threshold in ("off", "", None):
        return None
    return float(threshold)


def threshold_label(trace: dict, thr: float) -> str:
    """'threshold 3.20 nats (0.48·ln|V|) — 23% of drafted tokens above', from the trace."""
    text = f"threshold {thr:.2f} nats"
    vocab = (trace.get("info") or {}).get("vocab_size")
    if is_number(vocab) and vocab >= 2:
        text += f" ({thr / math.log(vocab):.2f}·ln|V|)"
    share = share_above(drafted_entropies(trace), thr)
    if share is not None:
        text += f" — {share:.0%} of drafted tokens above"
    return text


def entropy_figure(trace: dict | None, threshold=_FROM_CONFIG) -> go.Figure:
    """Draft entropy per token, the gate threshold, cloud calls and corrections; `threshold`: nats,
    None/"off", or "config" (the run's threshold resolved to nats)."""
    trace = trace or {}
    tokens = trace.get("tokens") or []
    fig = figure("Draft entropy per token", "token index", "entropy (nats)")
    if not tokens:
        return _empty(fig, "no tokens yet")
    xs = [t.get("i", n) for n, t in enumerate(tokens)]
    ys = [t.get("entropy") if is_number(t.get("entropy")) else None for t in tokens]
    _add_source_points(fig, tokens, xs, ys)
    finite = [y for y in ys if y is not None]
    # the first rejected draft at each index (reversed: the first one written wins)
    rej_by_at = {r["at"]: r for r in reversed(trace.get("rejected") or []) if isinstance(r.get("at"), int)}
    finite += [r["entropy"] for r in rej_by_at.values() if is_number(r.get("entropy"))]
    thr = _threshold_of(trace, threshold)
    top = max(finite + [thr if thr is not None and math.isfinite(thr) else 0.0, 0.5]) * 1.12
    _add_calls_and_corrections(fig, trace, tokens, rej_by_at, top)
    _add_threshold(fig, trace, thr)
    fig.update_yaxes(range=[0, top * 1.05], rangemode="tozero")
    add_dependence_curve(fig, tokens, xs)
    return fig


def _add_source_points(fig: go.Figure, tokens: list[dict], xs: list, ys: list) -> None:
    """A line through the tokens; one marker trace per source, so the legend names each colour."""
    fig.add_trace(go.Scatter(x=xs, y=ys, name="entropy", mode="lines", line=dict(color="#8c959f", width=1.5),
                             hoverinfo="skip"))
    for source in ("accepted", "corrected", "bonus", "draft"):
        pts = [(x, y, t) for x, y, t in zip(xs, ys, tokens) if t.get("source") == source and y is not None]
        if not pts:   # e.g. corrections: a cloud token has no draft entropy (the × marks show them)
            continue
        fig.add_trace(go.Scatter(
            x=[p[0] for p in pts], y=[p[1] for p in pts], name=SOURCE_LABELS.get(source, source),
            mode="markers", marker=dict(size=7, color=SOURCE_COLORS[source]),
            customdata=[[esc(visible(p[2].get("text"))), SOURCE_LABELS.get(source, source), p[2].get("round")]
                        for p in pts],
            hovertemplate="#%{x} 「%{customdata[0]}」<br>%{customdata[1]}, round %{customdata[2]}"
                          "<br>entropy %{y:.2f} nats<extra></extra>",
        ))


def _add_calls_and_corrections(fig: go.Figure, trace: dict, tokens: list[dict], rej_by_at: dict,
                               top: float) -> None:
    """▼ at each verified block's start; × at each correction, at its rejected draft's entropy."""
    starts = [r.get("start") for r in trace.get("rounds") or []
              if r.get("verified") and isinstance(r.get("start"), int)]
    if starts:
        fig.add_trace(go.Scatter(
            x=starts, y=[top] * len(starts), name="cloud call", mode="markers",
            marker=dict(symbol="triangle-down", size=9, color=CLOUD_CALL_COLOR),
            hovertemplate="cloud verified the block starting at #%{x}<extra></extra>",
        ))
    corr = [(t.get("i", n), rej_by_at.get(n, {}).get("entropy")) for n, t in enumerate(tokens)
            if t.get("source") == "corrected"]
    if corr:
        fig.add_trace(go.Scatter(
            x=[c[0] for c in corr], y=[c[1] if is_number(c[1]) else 0.0 for c in corr],
            name="correction", mode="markers",
            marker=dict(symbol="x", size=11, color=SOURCE_COLORS["corrected"], line=dict(width=1)),
            hovertemplate="cloud corrected #%{x} (rejected draft entropy %{y:.2f})<extra></extra>",
        ))


def _add_threshold(fig: go.Figure, trace: dict, thr) -> None:
    """The threshold line, labelled above the plot area, or a note saying there is none."""
    if thr is not None and math.isfinite(thr):
        fig.add_hline(y=thr, line=dict(color=SOURCE_COLORS["corrected"], dash="dash", width=1.5))
        fig.add_annotation(text=threshold_label(trace, thr), showarrow=False, xref="paper", yref="paper",
                           x=1.0, y=1.0, xanchor="right", yanchor="bottom",
                           font=dict(size=11, color=SOURCE_COLORS["corrected"]))
        return
    note = ("threshold inf: the cloud is never called" if thr is not None
            else "threshold off: the cloud verifies every block")
    fig.add_annotation(text=note, showarrow=False, xref="paper", yref="paper", x=0.0, y=1.0,
                       xanchor="left", yanchor="bottom", font=dict(size=11, color=NEUTRAL_COLOR))


DEPENDENCE_COLOR = "#7544BD"   # violet, as the token view's audio-dependence colouring


def add_dependence_curve(fig: go.Figure, tokens: list[dict], xs: list) -> None:
    """The cloud's audio dependence per token (nats) on a right-hand axis; nothing without it."""
    ys = [t.get("audio_dependence") if is_number(t.get("audio_dependence")) else None for t in tokens]
    if not any(y is not None for y in ys):
        return
    fig.add_trace(go.Scatter(
        x=xs, y=ys, name="audio dependence", mode="lines", yaxis="y2",
        line=dict(color=DEPENDENCE_COLOR, width=1.5, dash="dot"),
        customdata=[esc(visible(t.get("text"))) for t in tokens],
        hovertemplate="#%{x} 「%{customdata}」<br>audio dependence %{y:.2f} nats<extra></extra>",
    ))
    top = max(y for y in ys if y is not None)
    fig.update_layout(yaxis2=dict(title=term("audio_dependence").label + " (nats)", overlaying="y",
                                  side="right", rangemode="tozero", range=[0, max(top, 0.5) * 1.15],
                                  showgrid=False, color=DEPENDENCE_COLOR))


def accepted_length_figure(trace: dict | None) -> go.Figure:
    """Per round: stacked committed tokens by source, with the drafted count as a marker."""
    trace = trace or {}
    counts = Counter((t.get("round"), t.get("source")) for t in trace.get("tokens") or []
                     if isinstance(t.get("round"), int))      # (round, source) -> committed tokens
    rounds = {r.get("round"): r for r in trace.get("rounds") or [] if isinstance(r.get("round"), int)}
    ids = sorted({r for r, _ in counts} | set(rounds))
    fig = figure("Accepted length per round", "round", "tokens")
    if not ids:
        return _empty(fig, "no rounds yet")
    for source in ("accepted", "corrected", "bonus", "draft"):
        ys = [counts[r, source] for r in ids]
        if any(ys):
            fig.add_trace(go.Bar(x=ids, y=ys, name=SOURCE_LABELS[source], marker_color=SOURCE_COLORS[source],
                                 hovertemplate=f"round %{{x}}: %{{y}} {SOURCE_LABELS[source]}<extra></extra>"))
    drafted = [rounds.get(r, {}).get("drafted") for r in ids]
    if any(is_number(d) for d in drafted):
        fig.add_trace(go.Scatter(x=ids, y=drafted, name="drafted", mode="markers",
                                 marker=dict(symbol="line-ew-open", size=16, color="#1f2328", line=dict(width=2)),
                                 hovertemplate="round %{x}: %{y} drafted<extra></extra>"))
    fig.update_layout(barmode="stack", bargap=0.25, legend_traceorder="normal")
    step = 1 if len(ids) <= 30 else math.ceil(len(ids) / 15)      # whole-number rounds, first to last
    fig.update_xaxes(range=[ids[0] - 0.5, ids[-1] + 0.5], tick0=ids[0], dtick=step, tickformat="d")
    return fig


def position_acceptance(trace: dict) -> list[tuple[int, float, int]]:
    """(position, acceptance rate, rounds that drafted it) over verified rounds, 1-based."""
    steps = [(r.get("accepted") or 0, r.get("drafted") or 0) for r in trace.get("rounds") or [] if r.get("verified")]
    if steps:
        return [(p, a / n if n else 0.0, n) for p, (n, a) in enumerate(by_position(steps), 1)]
    per = (trace.get("metrics") or {}).get("per_position_acceptance") or []
    return [(p + 1, float(v), 0) for p, v in enumerate(per) if is_number(v)]


def depth_acceptance(trace: dict) -> list[tuple[int, float, int]]:
    """Tree rounds: (depth d, share of rounds reaching d - 1 that accepted a node at d, those rounds)."""
    trees = [r["tree"] for r in trace.get("rounds") or [] if r.get("tree")]
    deep = max((n["depth"] for t in trees for n in t.get("nodes") or []), default=0)
    out = []
    for d in range(1, deep + 1):
        reached = [t for t in trees if len(t["path"]) >= d - 1 and any(n["depth"] == d for n in t["nodes"])]
        if reached:
            out.append((d, sum(len(t["path"]) >= d for t in reached) / len(reached), len(reached)))
    return out


def position_acceptance_figure(trace: dict | None) -> go.Figure:
    """Acceptance by draft position; for a tree, by depth (siblings' slots are not positions)."""
    rows = depth_acceptance(trace or {})
    tree = bool(rows)
    rows = rows or position_acceptance(trace or {})
    fig = figure(*(("Acceptance by depth (tree)", "depth in the tree", "accepted") if tree else
                   ("Acceptance by draft position", "position in draft block", "accepted")))
    if not rows:
        return _empty(fig, "no verified rounds yet")
    fig.add_trace(go.Bar(
        x=[r[0] for r in rows], y=[r[1] for r in rows], name="acceptance",
        marker_color=SOURCE_COLORS["accepted"],
        text=[f"{100 * r[1]:.0f}%" for r in rows], textposition="outside", cliponaxis=False,
        customdata=[r[2] for r in rows],
        hovertemplate=("depth" if tree else "position") + " %{x}: %{y:.0%} of %{customdata} rounds<extra></extra>",
    ))
    fig.update_yaxes(range=[0, 1.15], tickformat=".0%")
    fig.update_xaxes(dtick=1)
    fig.update_layout(showlegend=False)
    return fig


# Batch columns: (title, raw metric name, readable name used by batch_view.results_table).
BATCH_HISTS = [
    ("Mean acceptance length", "mean_accepted_length", "acc. len"),
    ("Punctuation", "punct_density", "punct."),
    ("汉字", "hanzi_count", "汉字"),
    ("Speed", "tokens_per_s", "tokens/s"),
]
_GROUP_COLORS = ["#0072B2", "#CC79A7", "#009E73", "#E69F00"]   # A blue, B pink (as on A/B)


def _bin_edges(values, most: int = 15):
    """Histogram bin edges: numpy's 'auto', at most `most` bins; equal values get one bin of width 1."""
    if len(values) == 0:
        return np.array([0.0, 1.0])
    lo, hi = float(values.min()), float(values.max())
    if hi - lo < 1e-12:
        return np.array([lo - 0.5, lo + 0.5])
    edges = np.histogram_bin_edges(values, bins="auto")
    if len(edges) - 1 > most:
        edges = np.linspace(lo, hi, most + 1)
    return edges


def batch_distributions(df) -> go.Figure:
    """2x2 histograms over clips; one colour per configuration when df has a "config" column."""
    fig = make_subplots(rows=2, cols=2, subplot_titles=[t for t, _, _ in BATCH_HISTS],
                        horizontal_spacing=0.1, vertical_spacing=0.24)
    fig.update_layout(template="plotly_white", height=2 * HEIGHT, margin=dict(l=56, r=16, t=80, b=50),
                      title=dict(text="Batch distributions", font=dict(size=14), x=0.01),
                      barmode="overlay", legend=dict(orientation="h", y=1.12, x=1, xanchor="right"))
    if df is None or len(df) == 0:
        return _empty(fig, "no results yet")
    groups = [(None, df)]
    if "config" in df.columns and df["config"].nunique() > 1:
        groups = list(df.groupby("config", sort=False))
    for n, (title, raw, readable) in enumerate(BATCH_HISTS):
        row, col, t = n // 2 + 1, n % 2 + 1, term(raw)
        fig.update_xaxes(title_text=t.label + (f" ({t.unit})" if t.unit and t.unit != "%" else ""),
                         title_font=dict(size=11), tickformat=".0%" if t.unit == "%" else None, row=row, col=col)
        fig.update_yaxes(title_text="clips", title_font=dict(size=11), row=row, col=col)
        column = next((c for c in (raw, readable) if c in df.columns and df[c].notna().any()), None)
        if column is None:
            fig.add_annotation(text="no data", showarrow=False, row=row, col=col, x=0.5, y=0.5,
                               xref="x domain", yref="y domain", font=dict(color=NEUTRAL_COLOR))
            continue
        # bins computed here (shared by the configurations of a panel) and drawn as bars:
        # plotly.js's own binning of a handful of clips dropped most of them (issue 29)
        every = pd.to_numeric(df[column], errors="coerce").dropna().astype(float).to_numpy()
        edges = _bin_edges(every)
        for g, (name, sub) in enumerate(groups):
            values = pd.to_numeric(sub[column], errors="coerce").dropna().astype(float).to_numpy()
            counts, _ = np.histogram(values, bins=edges)
            ends = [f"{100 * e:.0f}%" if t.unit == "%" else f"{e:.3g}" for e in edges]
            w = np.diff(edges) / len(groups)          # A and B side by side in each bin, never overlaid
            fig.add_trace(go.Bar(
                x=edges[:-1] + w * (g + 0.5), y=counts, width=w * 0.92,
                name=f"config {name}" if name is not None else title, legendgroup=str(name),
                showlegend=name is not None and n == 0,
                marker_color=_GROUP_COLORS[g % len(_GROUP_COLORS)],
                customdata=list(zip(ends[:-1], ends[1:])),
                hovertemplate="%{customdata[0]}–%{customdata[1]}: %{y} clip(s)<extra>" + (
                    str(name) if name is not None else "") + "</extra>",
            ), row=row, col=col)
    if groups[0][0] is None:
        fig.update_layout(showlegend=False)
    return fig
