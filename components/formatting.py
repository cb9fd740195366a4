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
