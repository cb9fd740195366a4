"""Reference scoring of descriptions: chrF against a reference text, the emotion a description
names vs the clip's label, and the batch-level emotion metrics (per-label accuracy, the MER2024
weighted F1). Pure functions of strings and label lists.
"""
from __future__ import annotations

from collections.abc import Sequence

from specdec_core.audio.conditions import EMOTION_WORDS, LABELS
from specdec_core.decoding.vocab import is_cjk

# Character 6-grams, no word n-grams: Chinese has no spaces, so word n-grams would compare
# whole sentences; this is the usual chrF setting for Chinese.
_CHRF_CHAR_ORDER = 6


def chrf(hyp: str, ref: str) -> float:
    """Sentence chrF (sacrebleu), 0-100. Texts with any CJK char are compared with all
    whitespace stripped, so spacing or a tokenizer's spaces between hanzi do not count."""
    from sacrebleu.metrics import CHRF

    hyp, ref = hyp or "", ref or ""
    if any(is_cjk(ch) for ch in hyp + ref):
        hyp, ref = "".join(hyp.split()), "".join(ref.split())
    if not hyp or not ref:
        return 0.0
    metric = CHRF(char_order=_CHRF_CHAR_ORDER, word_order=0)
    return float(metric.sentence_score(hyp, [ref]).score)


def emotion_of_text(text: str) -> str | None:
    """The label whose emotion word occurs first in `text` (None when no emotion is named).

    First occurrence, not majority: a description names its conclusion once ("情绪愤怒"); a later
    mention is usually a reason or a contrast. Negations ("并不愤怒") are not understood."""
    best: tuple[int, int] | None = None  # (position, label order) breaks ties by LABELS order
    found = None
    for order, label in enumerate(LABELS):
        for word in EMOTION_WORDS.get(label, ()):
            pos = (text or "").find(word)
            if pos >= 0 and (best is None or (pos, order) < best):
                best, found = (pos, order), label
    return found


def emotion_hit(text: str, label: str | None) -> bool | None:
    """Whether the description names the clip's emotion; None when the clip has no label."""
    if not label:
        return None
    return emotion_of_text(text) == label


def _pairs(labels: Sequence, preds: Sequence) -> list[tuple[str, str | None]]:
    if len(labels) != len(preds):
        raise ValueError(f"labels and preds differ in length: {len(labels)} vs {len(preds)}")
    return [(y, p) for y, p in zip(labels, preds) if y]  # unlabeled clips are not scored


def _label_order(labels) -> list[str]:
    present = set(labels)
    return [lab for lab in LABELS if lab in present] + sorted(present - set(LABELS))


def per_label_accuracy(labels: Sequence, preds: Sequence) -> dict[str, float]:
    """{label: share of clips with that true label whose prediction is that label} (the
    per-class recall), in LABELS order. None predictions count as wrong; clips with an empty
    label are skipped."""
    pairs = _pairs(labels, preds)
    out = {}
    for lab in _label_order(y for y, _ in pairs):
        mine = [p for y, p in pairs if y == lab]
        out[lab] = sum(p == lab for p in mine) / len(mine)
    return out


def weighted_f1(labels: Sequence, preds: Sequence) -> float | None:
    """MER2024's metric: F1 per true class, averaged with weights = class support; None when no clip is
    labeled. A None prediction is a miss for its true class and a false positive for no class."""
    pairs = _pairs(labels, preds)
    if not pairs:
        return None
    total = 0.0
    for lab in _label_order(y for y, _ in pairs):
        tp = sum(1 for y, p in pairs if y == lab and p == lab)
        fp = sum(1 for y, p in pairs if y != lab and p == lab)
        fn = sum(1 for y, p in pairs if y == lab and p != lab)
        f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        total += f1 * (tp + fn)
    return total / len(pairs)


def score_text(text: str, reference: str | None, label: str | None) -> dict:
    """The per-clip scores a batch row carries: chrf (None without a reference), the emotion
    the text names, and whether it matches the label (None without a label)."""
    return {"chrf": round(chrf(text, reference), 2) if reference else None,
            "emotion": emotion_of_text(text),
            "emotion_hit": emotion_hit(text, label)}
