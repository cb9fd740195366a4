"""Where the time goes: a stacked bar per round (edge, cloud, remote, recorder hooks, other) of a
trace or a recording dict, from the timings the decoder or the recorder's hooks measured."""
from __future__ import annotations

import plotly.graph_objects as go

from specdec_core.analysis.metrics import round_split
from specdec_core.recorder import loop_round_times, recording_split

from .formatting import is_number
from .palette import CLOUD_CALL_COLOR, SOURCE_COLORS
from .plots import _empty, figure

# (key, label, colour): the stacking order, bottom to top
PARTS = [("edge_s", "edge forwards", SOURCE_COLORS["draft"]),
         ("cloud_s", "cloud forwards", CLOUD_CALL_COLOR),
         ("remote_s", "remote cloud requests", "#E69F00"),
         ("recorder_s", "recorder hooks", "#C8CDD2"),
         ("other_s", "other (loop Python, sampling, tracing)", SOURCE_COLORS["corrected"])]


def timing_rows(obj: dict | None) -> tuple[list[dict], dict | None]:
    """(per-round splits, total split) of a trace or recording; ([], None) without timings."""
    obj = obj or {}
    if str(obj.get("schema", "")).startswith("specscope.recording/") and "forwards" in obj:
        rows = [{**r, "remote_s": 0.0, "other_s": r["round_s"] - r["edge_s"] - r["cloud_s"]
                 - r["recorder_s"]} for r in loop_round_times(obj)]
        return rows, recording_split(obj)
    rounds = [r for r in obj.get("rounds") or [] if isinstance(r, dict)]
    total = (obj.get("metrics") or {}).get("time_split")
    if not any(is_number(r.get("round_s")) and r.get("round_s") for r in rounds):
        return [], total if isinstance(total, dict) else None
    rows = [{**round_split(r), "device_s": r.get("device_s")} for r in rounds]
    return rows, total if isinstance(total, dict) else None


def _title(total: dict | None) -> str:
    if not total or not total.get("total_s"):
        return "Where the time goes, per round"
    t = total["total_s"]
    parts = [(lab.split(" (")[0].replace(" forwards", "").replace("remote cloud requests", "remote"),
              total.get(key) or 0.0) for key, lab, _ in PARTS]
    if total.get("caller_s"):
        parts.append(("caller (UI)", total["caller_s"]))   # the UI held the stream between rounds
    body = " · ".join(f"{n} {v / t:.0%}" for n, v in parts if v / t >= 0.005)
    return f"Where the time goes: {t:.2f} s = {body}"


def timing_figure(obj: dict | None) -> go.Figure:
    """Stacked bar per round, in milliseconds; the title gives the whole run's shares."""
    rows, total = timing_rows(obj)
    fig = figure(_title(total), "round", "ms")
    if not rows:
        return _empty(fig, "no timings in this run (recorded before timings were kept)"
                      if (obj or {}).get("rounds") or (obj or {}).get("forwards") else "no rounds yet")
    xs = list(range(1, len(rows) + 1))
    for key, label, color in PARTS:
        ys = [max(r.get(key) or 0.0, 0.0) * 1e3 for r in rows]
        if not any(ys):
            continue
        fig.add_trace(go.Bar(x=xs, y=ys, name=label, marker_color=color,
                             customdata=[[(r.get(key) or 0.0) / r["round_s"] if r.get("round_s") else 0.0]
                                         for r in rows],
                             hovertemplate=f"round %{{x}}: %{{y:.2f}} ms {label} "
                                           f"(%{{customdata[0]:.0%}} of the round)<extra></extra>"))
    _device_line(fig, xs, rows)
    caller = (total or {}).get("caller_s")
    if caller and (total or {}).get("total_s"):
        # measured for the whole run, not per round: a legend entry so the title's share has a name
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"caller (UI) {caller / total['total_s']:.0%}: "
                                 "between rounds, not in the bars", marker=dict(symbol="square", size=10, color="#E8E8E8",
                                                                 line=dict(color="#8c959f", width=1)),
                                 hoverinfo="skip"))
    fig.update_layout(barmode="stack", bargap=0.2, legend_traceorder="normal")
    fig.update_xaxes(dtick=1 if len(rows) <= 30 else None)
    return fig


def _device_line(fig: go.Figure, xs: list, rows: list[dict]) -> None:
    """On a GPU, each round's device time (CUDA events) over its bar: above it is host overhead."""
    dev = [r.get("device_s") for r in rows]
    if not any(is_number(d) for d in dev):
        return
    host = [r["round_s"] - d if is_number(d) and r.get("round_s") else None for r, d in zip(rows, dev)]
    fig.add_trace(go.Scatter(
        x=xs, y=[d * 1e3 if is_number(d) else None for d in dev], mode="lines+markers",
        name="device time (CUDA events); above it: host overhead", line=dict(color="#222222", width=2),
        customdata=[[h * 1e3 if h is not None else 0.0] for h in host],
        hovertemplate="round %{x}: device %{y:.2f} ms, host overhead %{customdata[0]:.2f} ms<extra></extra>"))
