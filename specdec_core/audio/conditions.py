"""Prosody condition vocabulary shared by the audio front end, the corpus and the demo prompt.

The demo models only ever see these tokens, so extraction (prosody.py) and the corpus that
trained them (devtools/demo_corpus.py) must agree; one table in one file makes that true."""
from __future__ import annotations

LABELS = ("neutral", "angry", "happy", "sad", "worried", "surprise")

# feature -> ordered bins (low..high). Token form: <pitch_high>
FEATURES = {
    "pitch": ("low", "mid", "high"),      # median F0 of voiced frames
    "pvar": ("flat", "mid", "wide"),      # F0 variation (semitone std)
    "energy": ("low", "mid", "high"),     # RMS level of active frames
    "rate": ("slow", "mid", "fast"),      # syllable-like peaks per second
    "pause": ("few", "some", "many"),     # fraction of silent frames inside the clip
}

# Chinese emotion words the corpus uses; emotion_of_text() in scoring maps them back.
EMOTION_WORDS = {
    "neutral": ("平静", "中性"),
    "angry": ("愤怒", "生气"),
    "happy": ("开心", "高兴", "愉快"),
    "sad": ("悲伤", "难过"),
    "worried": ("担忧", "焦虑"),
    "surprise": ("惊讶", "吃惊"),
}

PROMPT_TYPES = ("detailed", "concise")
LENGTH_BANDS = {"detailed": (30, 70), "concise": (8, 16)}  # hanzi per description


def token(feature: str, value: str) -> str:
    return f"<{feature}_{value}>"


def all_condition_tokens() -> list[str]:
    return [token(f, v) for f, vals in FEATURES.items() for v in vals]


def condition_tokens(bins: dict[str, str]) -> list[str]:
    """bins like {"pitch": "high", ...} -> ["<pitch_high>", ...] in FEATURES order."""
    return [token(f, bins[f]) for f in FEATURES]
