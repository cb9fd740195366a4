"""Small, forgiving formatters: traces arrive partial while streaming, so None is common."""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

DASH = "—"


def stylesheet(name: str) -> str:
    """A static stylesheet of components/css/ (rules built from Python values stay in the modules)."""
    return (Path(__file__).parent / "css" / f"{name}.css").read_text(encoding="utf-8")


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
    """A metric value with its glossary unit, rounded for reading; why a run ended in words."""
    from specdec_core.analysis.glossary import term

    if value is None:
        return DASH
    if key == "ended_by":    # why a run ended, in words
        return ended_by_words(value)
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
    if text == "1" and short_unit.isalpha() and len(short_unit) > 2:    # "1 token", "1 call"
        short_unit = short_unit.removesuffix("s")
    return f"{text} {short_unit}" if short_unit else text


# ---- internal names in human words (one place: the Live tab, cards and status line use these)
ENDED_BY_WORDS = {"eos": "end-of-sequence token", "sentence": "first sentence end",
                  "max_tokens": "max new tokens", "cycle": "a cycle (on cycle: stop)",
                  "fault": "a fault's stop rule", "cancelled": "the Stop button", "time_limit": "time limit"}


def ended_by_words(value) -> str:
    """Why a run ended, in words ('max_tokens' -> 'max new tokens'); DASH when unknown."""
    if not value:
        return DASH
    return ENDED_BY_WORDS.get(str(value), words(str(value)))


def words(name: str) -> str:
    """A snake_case name read as words: 'seed000_fixed' -> 'seed 000 fixed'."""
    return re.sub(r"(?<=[a-z])(?=\d)", " ", str(name).replace("_", " ")).strip()


# Notation of the knob schema and the presets (exact, for the CLI and docs) -> words for the page
PLAIN_WORDS = (
    ("min(1, p/q)", "accept with probability cloud p ÷ edge p (at most 1)"),
    ("draft == cloud argmax", "the draft is the cloud's top choice"),
    ("cloud rank <= rank_threshold", "the cloud ranks the draft within the rank threshold"),
    ("For verify=rank:", "With the rank rule:"),
    ("(in entropy_unit)", "(in the unit picked below)"),
    ("a fraction of ln|V| (the largest entropy on the draft vocabulary)",
     "a share of the largest entropy possible on the draft vocabulary"),
    ("(× ln|V|)", "(share of max entropy)"),
    ("·ln|V|", " × max entropy"),
    ("ln|V|", "max entropy"),
    ("after min_new_tokens", "after min new tokens"),
)


def plain(text: str) -> str:
    """A help line, label or preset note with its formulas and knob names in words."""
    out = str(text or "")
    for raw, said in PLAIN_WORDS:
        out = out.replace(raw, said)
    # the bug reports are "seed 000 A" in the notes; beside the `seed` knob the page says "note"
    return re.sub(r"\bseed ?(?=\d{3})", "source note ", out)


def snake_words(text) -> str:
    """The snake_case names in a line as words ('stale_cache' -> 'stale cache'); for the page only."""
    return re.sub(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b", lambda m: m.group(0).replace("_", " "), str(text or ""))


def fault_label(name) -> str:
    """A fault or code as the page names it: 'no_resync' -> 'no resync' (values keep the name)."""
    return str(name or "").replace("_", " ")
