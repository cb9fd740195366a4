"""Prosody condition vocabulary shared by the audio front end, the corpus and the demo prompt.

The demo models only ever see these tokens, so extraction (prosody.py) and text generation
(demo/corpus.py) must agree on them; keeping the table in one file is what makes that true.
"""
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

# The typical bins for each label. The corpus samples around these, and the sample clips are
# synthesised so that extraction lands on them.
PROFILES = {
    "neutral": {"pitch": "mid", "pvar": "flat", "energy": "mid", "rate": "mid", "pause": "few"},
    "angry": {"pitch": "high", "pvar": "wide", "energy": "high", "rate": "fast", "pause": "few"},
    "happy": {"pitch": "high", "pvar": "wide", "energy": "mid", "rate": "mid", "pause": "few"},
    "sad": {"pitch": "low", "pvar": "flat", "energy": "low", "rate": "slow", "pause": "many"},
    "worried": {"pitch": "mid", "pvar": "mid", "energy": "low", "rate": "slow", "pause": "some"},
    "surprise": {"pitch": "high", "pvar": "wide", "energy": "high", "rate": "mid", "pause": "some"},
}

# Arousal of each label: loud / fast / wide-ranging speech reads as aroused.
AROUSAL = {"neutral": "low", "angry": "high", "happy": "high", "sad": "low", "worried": "low",
           "surprise": "high"}

# How much each feature counts when a bin combination is matched to a profile. Pitch level
# counts least: it is the feature that depends most on the speaker (prosody.py estimates the
# voice's register, and that estimate can be off for a very low female or a very high male
# voice). Unequal weights also break ties between equally distant profiles.
LABEL_WEIGHTS = {"pitch": 0.7, "pvar": 1.0, "energy": 1.25, "rate": 1.1, "pause": 0.9}


def label_for(bins: dict[str, str]) -> str:
    """The emotion a bin combination implies: the nearest PROFILES entry (weighted distance over
    the ordinal bins). Defined for all 3**5 combinations; the corpus labels every description
    with it, so what the demo models learn to say is consistent with the cues they describe."""
    def dist(label):
        prof = PROFILES[label]
        return sum(w * abs(FEATURES[f].index(bins[f]) - FEATURES[f].index(prof[f]))
                   for f, w in LABEL_WEIGHTS.items())
    return min(LABELS, key=lambda lab: (dist(lab), LABELS.index(lab)))


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
