"""Text-level quality metrics of a generated description (seed 001's regression metrics).
On characters, not tokens (seed 001 D: token-id punctuation counts are skewed by the vocabulary)."""
from __future__ import annotations

import unicodedata

from specdec_core.decoding.vocab import is_cjk

# Template pieces that must never reach the text (seed 000 A: "Human" leaking into outputs).
LEAK_MARKERS = ("Human", "User", "user\n", "assistant", "<|im_", "<|endoftext|>")


def _repeats(s: str, n: int) -> tuple[int, int]:
    """(n-gram occurrences that repeat an earlier one, all n-gram occurrences) of string s."""
    total = max(0, len(s) - n + 1)
    return total - len({s[i:i + n] for i in range(total)}), total


def repeated_clauses(text: str | None) -> int:
    """Clauses (runs of 2+ CJK chars between other chars) that say again a clause said earlier in
    the text: "语速中等，语速中等" -> 1. A repeated phrase the n-gram rate of a long text dilutes."""
    clauses = [c for c in "".join(ch if is_cjk(ch) else " " for ch in text or "").split() if len(c) >= 2]
    return len(clauses) - len(set(clauses))


def text_metrics(text: str) -> dict:
    """Metrics of one text.

    hanzi_count       CJK content chars (U+4E00-U+9FFF).
    char_count        non-whitespace chars.
    punct_count       punctuation chars (Unicode category P*).
    punct_density     punct_count / char_count (0.0 for an empty text); seed 001: 10-25% is
                      normal for a short Chinese sentence, > 40% is a flood.
    repeat_rate       over c = the text with every non-CJK char removed (punctuation-stripped
                      CJK text): for n in (2, 3), an n-gram occurrence is *repeated* when the
                      same n-gram occurs earlier in c; repeat_rate = (repeated 2-grams +
                      repeated 3-grams) / (all 2-grams + all 3-grams), 0.0 when c has < 2 chars.
                      E.g. "音色中，音色中，音色中，": c = 音色中音色中音色中, 5 of 8 bigrams and
                      4 of 7 trigrams repeat -> 9/15 = 0.6.
    repeat_rate_2/_3  the same for 2-grams / 3-grams alone.
    adjacent_repeats  positions in the raw text where a CJK char equals the char right before
                      it ("慢慢" -> 1, "哈哈哈" -> 2, "音，音" -> 0).
    template_leak     any of LEAK_MARKERS occurs in the text (case-sensitive);
    leak_markers      the markers found, in LEAK_MARKERS order.
    """
    solid = [ch for ch in text if not ch.isspace()]
    punct = sum(unicodedata.category(ch).startswith("P") for ch in solid)   # ，。、 ,.! “”（）…—
    cjk = "".join(ch for ch in text if is_cjk(ch))
    r2, t2 = _repeats(cjk, 2)
    r3, t3 = _repeats(cjk, 3)
    leaks = [m for m in LEAK_MARKERS if m in text]
    return {
        "hanzi_count": len(cjk),
        "char_count": len(solid),
        "punct_count": punct,
        "punct_density": punct / len(solid) if solid else 0.0,
        "repeat_rate": (r2 + r3) / (t2 + t3) if t2 + t3 else 0.0,
        "repeat_rate_2": r2 / t2 if t2 else 0.0,
        "repeat_rate_3": r3 / t3 if t3 else 0.0,
        "adjacent_repeats": sum(1 for a, b in zip(text, text[1:]) if a == b and is_cjk(a)),
        "template_leak": bool(leaks),
        "leak_markers": leaks,
    }
