"""Grammar for MER-style Chinese emotion descriptions, conditioned on prosody bins.

Order follows the source notes (information first): acoustic cues -> one emotion word -> a brief
reason. Cues are written only from the bins, and which 3-5 features get mentioned is random, so
a model can only name the right emotion by reading the condition tokens in the prompt.
The many synonyms and orders keep a small edge model imperfect; recurring fragments such as
"音色中" and "中等" give a weak greedy model something to loop on, as in the source notes.
Documents use the demo prompt (specdec_core/demo/prompt.py), which the product keeps.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from specdec_core.audio import conditions as C
from specdec_core.demo.prompt import IM_END, IM_START, INSTRUCTIONS, SYSTEM_PROMPT, prompt_text, user_turn

# The label rule. The typical bins for each label: the corpus samples around these, and the
# sample clips (scripts/make_samples.py) are synthesised so that extraction lands on them.
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
        return sum(w * abs(C.FEATURES[f].index(bins[f]) - C.FEATURES[f].index(prof[f]))
                   for f, w in LABEL_WEIGHTS.items())
    return min(C.LABELS, key=lambda lab: (dist(lab), C.LABELS.index(lab)))


# Bins are drawn uniformly over all 3**5 combinations with probability UNIFORM_P, otherwise around
# a random label's profile (each feature the typical bin with probability TYPICAL_P, else a
# neighbour): every cue combination a clip can produce is covered, and the typical ones, which
# real clips produce most, are seen more often. The label is never drawn on its own: it is
# label_for(bins), so the emotion a description names always agrees with its cues.
UNIFORM_P = 0.5
TYPICAL_P = 0.75

# feature -> bin -> (long phrases for detailed, short phrases for concise). Every phrase names
# exactly one bin; tests check no phrase of another bin shows up in a description.
CUES = {
    "pitch": {
        "low": (("音调偏低", "音调较低", "声音低沉", "嗓音低沉", "音高偏低"), ("音调低", "声音低沉")),
        "mid": (("音调适中", "音调中等", "音高正常", "音调不高不低"), ("音调适中", "音调中等")),
        "high": (("音调偏高", "音调较高", "嗓音高亢", "音高明显偏高"), ("音调高", "嗓音高亢")),
    },
    "pvar": {
        "flat": (("语调平淡", "语调单调", "音调起伏不大", "语调没有什么变化"), ("语调平淡", "没有起伏")),
        "mid": (("语调略有起伏", "语调有些变化", "抑扬变化适度"), ("略有起伏",)),
        "wide": (("语调起伏很大", "抑扬顿挫明显", "语调变化剧烈", "音调忽高忽低"), ("起伏大", "忽高忽低")),
    },
    "energy": {
        "low": (("音量较小", "声音微弱", "音量偏低", "声音很轻"), ("音量小", "声音轻")),
        "mid": (("音量适中", "音量中等", "音量正常"), ("音量适中", "音量中等")),
        "high": (("音量较大", "声音响亮", "音量很高", "嗓门很大"), ("音量大", "声音响")),
    },
    "rate": {
        "slow": (("语速较慢", "语速缓慢", "说话慢吞吞", "语速偏慢"), ("语速慢", "说得慢")),
        "mid": (("语速适中", "语速中等", "语速正常", "节奏平稳"), ("语速适中", "语速中等")),
        "fast": (("语速较快", "语速很快", "语气急促", "说话又急又快"), ("语速快", "语气急促")),
    },
    "pause": {
        "few": (("几乎没有停顿", "表达流畅", "话语连贯"), ("很流畅", "没停顿")),
        "some": (("偶有停顿", "中间有一些停顿", "偶尔停顿一下"), ("偶有停顿",)),
        "many": (("停顿较多", "说得断断续续", "多次停顿", "停顿频繁"), ("停顿多", "断断续续")),
    },
}

# Voice-quality cue tied to the label, not to a bin. "音色中…" is one of the loop seeds.
TIMBRE = {
    "neutral": ("音色中等", "音色自然", "音色中没有明显波动"),
    "angry": ("音色尖锐", "音色中带着火气", "音色紧绷"),
    "happy": ("音色明亮", "音色中带着笑意", "音色轻快"),
    "sad": ("音色暗淡", "音色中带着哽咽", "音色沙哑"),
    "worried": ("音色发紧", "音色中透着不安", "音色有些颤抖"),
    "surprise": ("音色上扬", "音色中透着意外", "音色一下子变亮"),
}

OPENERS = ("说话人", "这段语音中，说话人", "听起来，说话人", "从声音来看，说话人", "音频中的说话人",
           "说话时")
EMOTION_CLAUSES = ("流露出{w}的情绪", "表现出明显的{w}", "显得十分{w}", "整体情绪偏向{w}",
                   "可以判断其情绪为{w}", "透露出{w}的情绪", "听起来比较{w}", "给人一种{w}的感觉")
REASON_LEADS = ("可能是因为", "或许是", "推测是", "大概是", "原因可能是")
REASONS = {
    "neutral": ("在陈述一件日常的事情", "只是在平常地介绍情况", "正在客观地说明事实", "在和别人讨论工作安排",
                "在转述别人的话", "在回答一个普通的问题", "在描述自己的日常生活", "在交代一些具体的细节"),
    "angry": ("遇到了不公平的事情", "对方的做法让他无法接受", "自己的意见被人忽视", "被别人误解和指责",
              "事情被人搞砸了", "对方一再失约", "受到了不合理的对待", "有人不守规矩"),
    "happy": ("听到了好消息", "计划顺利完成了", "和朋友聊得很投机", "收到了期待已久的礼物",
              "考试取得了好成绩", "即将去旅行", "得到了别人的认可", "和家人团聚"),
    "sad": ("失去了重要的东西", "想起了离开的亲人", "努力没有得到回报", "和朋友分别",
            "经历了一次失败", "遭受了挫折", "回忆起过去的遗憾", "感到孤单无助"),
    "worried": ("对未来没有把握", "事情的结果还不确定", "家人身体不太好", "工作可能出问题",
                "面临一场重要的考试", "不知道该怎么解决眼前的问题", "在等待一个重要的通知", "钱不够用"),
    "surprise": ("听到了意想不到的消息", "事情的发展出乎意料", "突然遇到了老朋友", "看到了意外的结果",
                 "没想到对方会这样说", "发现了一个秘密", "收到了突如其来的邀请", "事情突然发生了变化"),
}
CONCISE_EMOTION = ("显得{w}", "情绪{w}", "听起来很{w}", "透着{w}", "应是{w}", "语气{w}")

_HANZI = re.compile(r"[\u4e00-\u9fff]")


def count_hanzi(text: str) -> int:
    return len(_HANZI.findall(text))


def emotion_words_in(text: str) -> list[tuple[str, str]]:
    """(label, word) for every emotion-word occurrence, left to right."""
    hits = []
    for label, words in C.EMOTION_WORDS.items():
        for w in words:
            hits += [(m.start(), label, w) for m in re.finditer(re.escape(w), text)]
    return [(lab, w) for _, lab, w in sorted(hits)]


def cue_hits(text: str) -> list[tuple[str, str, str]]:
    """(feature, bin, phrase) for every cue phrase found in text."""
    out = []
    for feat, bins in CUES.items():
        for b, (long, short) in bins.items():
            out += [(feat, b, p) for p in set(long + short) if p in text]
    return out


@dataclass
class Example:
    label: str
    bins: dict
    prompt_type: str
    text: str
    cues: list = field(default_factory=list)   # (feature, phrase) written into text

    @property
    def cond_tokens(self) -> list[str]:
        return C.condition_tokens(self.bins)


def sample_bins(label: str | None, rng: random.Random) -> dict[str, str]:
    """Bins around label's profile; label=None: uniform over every combination."""
    if label is None:
        return {feat: rng.choice(values) for feat, values in C.FEATURES.items()}
    bins = {}
    for feat, values in C.FEATURES.items():
        i = values.index(PROFILES[label][feat])
        if rng.random() >= TYPICAL_P:
            i = rng.choice([j for j in (i - 1, i + 1) if 0 <= j < len(values)])
        bins[feat] = values[i]
    return bins


def _detailed(label, bins, rng):
    feats = rng.sample(list(C.FEATURES), rng.randint(3, 5))
    cues = [(f, rng.choice(CUES[f][bins[f]][0])) for f in feats]
    parts = [p for _, p in cues]
    if rng.random() < 0.35:
        parts.insert(rng.randint(0, len(parts)), rng.choice(TIMBRE[label]))
    opener = rng.choice(OPENERS)
    word = rng.choice(C.EMOTION_WORDS[label])
    emo = rng.choice(EMOTION_CLAUSES).format(w=word)
    reason = rng.choice(REASON_LEADS) + rng.choice(REASONS[label])
    text = opener + "，".join(parts) + "，" + emo + "，" + reason + "。"
    return text, cues


def _concise(label, bins, rng):
    feats = rng.sample(list(C.FEATURES), rng.choice((1, 2, 2, 2, 3)))
    cues = [(f, rng.choice(CUES[f][bins[f]][1])) for f in feats]
    sep = rng.choice(("", "，", "、"))
    word = rng.choice(C.EMOTION_WORDS[label])
    text = sep.join(p for _, p in cues) + "，" + rng.choice(CONCISE_EMOTION).format(w=word) + "。"
    return text, cues


def all_bin_combinations() -> list[dict[str, str]]:
    """Every combination of feature bins (243), in a fixed order."""
    combos = [{}]
    for feat, values in C.FEATURES.items():
        combos = [{**c, feat: v} for c in combos for v in values]
    return combos


def draw_bins(rng: random.Random) -> dict[str, str]:
    if rng.random() < UNIFORM_P:
        return sample_bins(None, rng)
    return sample_bins(rng.choice(C.LABELS), rng)


def make_example(rng: random.Random, label: str | None = None, prompt_type: str | None = None,
                 bins: dict | None = None) -> Example:
    """One description. Given bins, the label is the rule's (label_for); given only a
    label, bins are drawn around its profile until the rule agrees; given neither, both are
    drawn (draw_bins). An explicit label AND bins is taken as it is (for tests)."""
    prompt_type = prompt_type or rng.choice(C.PROMPT_TYPES)
    if bins is None and label is not None:
        bins = sample_bins(label, rng)
        while label_for(bins) != label:
            bins = sample_bins(label, rng)
    bins = bins or draw_bins(rng)
    label = label or label_for(bins)
    lo, hi = C.LENGTH_BANDS[prompt_type]
    write = _detailed if prompt_type == "detailed" else _concise
    while True:  # rejection keeps every description inside its band
        text, cues = write(label, bins, rng)
        if lo <= count_hanzi(text) <= hi:
            return Example(label, bins, prompt_type, text, cues)


def document(rng: random.Random, second_turn_p: float = 0.3) -> tuple[str, Example]:
    """One training document. Some continue with a second user turn, so a decoder that fails to
    stop on <|im_end|> by id visibly leaks "user" and the next instruction."""
    ex = make_example(rng)
    doc = prompt_text(ex.cond_tokens, ex.prompt_type) + ex.text + IM_END
    if rng.random() < second_turn_p:
        ex2 = make_example(rng)
        doc += ("\n" + user_turn(ex2.cond_tokens, ex2.prompt_type) + f"{IM_START}assistant\n"
                + ex2.text + IM_END)
    return doc, ex


def charset() -> set[str]:
    """Every character the grammar can emit, so the tokenizer never needs <unk> on the corpus."""
    strings = [SYSTEM_PROMPT, *INSTRUCTIONS.values(), "systemuserassistant\n", *OPENERS,
               *EMOTION_CLAUSES, *REASON_LEADS, *CONCISE_EMOTION, "，、。"]
    for bins in CUES.values():
        for long, short in bins.values():
            strings += [*long, *short]
    for table in (TIMBRE, REASONS, C.EMOTION_WORDS):
        for values in table.values():
            strings += list(values)
    chars = set("".join(strings))
    chars -= set("{}")  # format placeholders
    return chars
