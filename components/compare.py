"""A/B comparison: metric diff table with a "better" column, and a character-level text diff."""

from __future__ import annotations

import difflib
import math

import pandas as pd

from .formatting import esc, is_number

# +1: higher is better, -1: lower is better. Metrics not listed have no direction (e.g.
# hanzi_count, which should sit inside the prompt type's band rather than grow or shrink).
DIRECTION = {
    "acceptance_rate": +1,
    "mean_accepted_length": +1,
    "tokens_per_s": +1,
    "chrf": +1,
    "emotion_hit": +1,
    "punct_density": -1,
    "repeat_rate": -1,
    "adjacent_repeats": -1,
    "cloud_calls": -1,
    "cloud_call_rate": -1,
    "target_forwards": -1,
    "corrections": -1,
    "wall_s": -1,
    "cycles": -1,
    "template_leak": -1,
    "cache_desyncs": -1,
    "rejected_tokens": -1,
    "draft_forwards": -1,
}

# Display order: headline metrics first, the rest alphabetically after them.
ORDER = [
    "acceptance_rate", "mean_accepted_length", "cloud_calls", "cloud_call_rate", "corrections",
    "tokens_per_s", "wall_s", "hanzi_count", "punct_density", "repeat_rate", "adjacent_repeats",
    "cycles", "template_leak", "ended_by", "new_tokens", "target_forwards", "draft_forwards",
    "per_position_acceptance", "chrf", "emotion_hit",
]

DIFF_CSS = """
.ss-diff { font-family: system-ui, "Noto Sans CJK SC", "WenQuanYi Micro Hei", sans-serif; }
.ss-diff-legend { font-size: 12.5px; color: #57606a; margin-bottom: 6px; }
.ss-diff-text { font-size: 18px; line-height: 1.9; word-break: break-all; white-space: pre-wrap; }
.ss-diff del { background: #fbdcc6; color: #8a3200; text-decoration: line-through;
  text-decoration-color: #D55E00; border-radius: 2px; }
.ss-diff ins { background: #cfe6f7; color: #003f66; text-decoration: underline;
  text-decoration-color: #0072B2; text-underline-offset: 3px; border-radius: 2px; }
"""


def _scalar(value):
    """Comparable form of a metric value: lists count their items, bools become 0/1."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (list, tuple)):
        if value and all(is_number(v) for v in value):  # per-position rates: show, don't compare
            return " / ".join(f"{v:.2f}" for v in value)
        return len(value)
    if isinstance(value, dict):
        return None
    return value


def _better(key: str, a, b) -> str:
    direction = DIRECTION.get(key)
    if direction is None or not (is_number(a) and is_number(b)):
        return ""
    if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
        return "="
    return "B" if (b - a) * direction > 0 else "A"


def metric_diff_table(metrics_a: dict | None, metrics_b: dict | None) -> pd.DataFrame:
    """One row per metric: A, B, delta (B - A) and which side is better where that has a direction."""
    a_all, b_all = metrics_a or {}, metrics_b or {}
    keys = [k for k in ORDER if k in a_all or k in b_all]
    keys += sorted(k for k in set(a_all) | set(b_all) if k not in ORDER)
    rows = []
    for key in keys:
        a, b = _scalar(a_all.get(key)), _scalar(b_all.get(key))
        if isinstance(a_all.get(key), dict) or isinstance(b_all.get(key), dict):
            continue
        delta = round(b - a, 4) if is_number(a) and is_number(b) else None
        rows.append({
            "metric": key,
            "A": round(a, 4) if isinstance(a, float) else a,
            "B": round(b, 4) if isinstance(b, float) else b,
            "delta": delta,
            "better": _better(key, a, b),
        })
    return pd.DataFrame(rows, columns=["metric", "A", "B", "delta", "better"])


def char_diff_html(text_a: str | None, text_b: str | None) -> str:
    """Character diff of two outputs: A-only text struck through, B-only text underlined."""
    a, b = text_a or "", text_b or ""
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    parts = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            parts.append(esc(a[i1:i2]))
            continue
        if op in ("delete", "replace"):
            parts.append(f"<del>{esc(a[i1:i2])}</del>")
        if op in ("insert", "replace"):
            parts.append(f"<ins>{esc(b[j1:j2])}</ins>")
    same = f"{100 * matcher.ratio():.0f}% of characters in common" if (a or b) else "both texts are empty"
    return (
        '<div class="ss-diff"><div class="ss-diff-legend"><del>only in A</del> · <ins>only in B</ins> · '
        f'{same}</div><div class="ss-diff-text">{"".join(parts)}</div></div>'
    )
