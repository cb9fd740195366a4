"""A served engine's acceptance by draft and context position (issue 49), the collapse marked."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots


def acceptance_figure(report: dict | None) -> go.Figure:
    fig = make_subplots(rows=1, cols=2, subplot_titles=("by draft position", "by context position"))
    acc = (report or {}).get("acceptance") or {}
    pos = acc.get("by_draft_position") or []
    fig.add_bar(x=[p["position"] for p in pos], y=[100 * p["rate"] for p in pos], name="draft position",
                row=1, col=1)
    ctx = acc.get("by_context") or []
    fig.add_scatter(x=[c["context"] for c in ctx], y=[100 * c["accepted"] / max(1, c["drafted"]) for c in ctx],
                    mode="markers", name="step", row=1, col=2)
    cliff = next((f for f in (report or {}).get("findings") or [] if f.get("code") == "acceptance_collapse"), None)
    if cliff:
        fig.add_vline(x=cliff["evidence"]["position"], line_dash="dash", row=1, col=2)
    fig.update_yaxes(range=[0, 105], title_text="drafts accepted (%)")
    fig.update_xaxes(title_text="j-th draft of a step", row=1, col=1)
    fig.update_xaxes(title_text="tokens before the step", row=1, col=2)
    fig.update_layout(height=280, showlegend=False, margin=dict(l=40, r=10, t=30, b=40))
    return fig
