"""Small, forgiving formatters: traces arrive partial while streaming, so None is common."""

from __future__ import annotations

import html
import math

DASH = "—"


def esc(value) -> str:
    """HTML-escape anything (quotes too, because values also land in attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def visible(text: str | None) -> str:
    """Token text with invisible characters made visible, NOT yet escaped."""
    if text is None or text == "":
        return "∅"
    return text.replace("\n", "↵").replace("\t", "⇥").replace("\r", "␍")


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def num(value, digits: int = 3) -> str:
    if not is_number(value):
        return DASH
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def pct(value, digits: int = 1) -> str:
    return f"{100 * value:.{digits}f}%" if is_number(value) else DASH


def fmt(key: str, value, digits: int | None = None) -> str:
    """A metric value with its unit from the glossary (analysis/glossary.py): shares as
    percentages, seconds with 's', counts with their unit word; rounded for reading."""
    from specdec_core.analysis.glossary import term

    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        if value and all(is_number(v) for v in value):
            return " / ".join(f"{100 * v:.0f}%" if term(key).unit == "%" else f"{v:.2f}" for v in value)
        return str(len(value))
    if not is_number(value):
        return str(value)
    unit = term(key).unit
    if unit == "%":
        return pct(value, 1 if digits is None else digits)
    if unit == "×":
        return f"{value:.2f}×"
    if unit == "% chars":
        return f"{100 * value:.0f}%"
    if isinstance(value, int) or float(value).is_integer() and unit not in ("s", "tokens per cloud call", "tokens/s"):
        text = str(int(value))
    elif unit == "s":
        text = f"{value:.2f}"
    elif unit == "tokens/s":
        text = f"{value:.1f}"
    else:
        text = f"{value:.{2 if digits is None else digits}f}"
    short_unit = {"tokens per cloud call": "tokens/call"}.get(unit, unit)
    return f"{text} {short_unit}" if short_unit else text
