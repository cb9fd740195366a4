"""Synthesise the sample clips in sample_audio/ with espeak-ng's Mandarin voice.

    .venv/bin/python scripts/make_samples.py            # writes sample_audio/*.wav + manifest.csv
    .venv/bin/python scripts/make_samples.py --check    # only prints extracted bins vs profile

Each emotion gets its own pitch, pitch range, speed, amplitude and pauses, chosen (together with
the thresholds in specdec_core/prosody.py) so that prosody.extract() lands on the label's
conditions.PROFILES entry: that is what lets the demo model "hear" the emotion.

Each phrase is synthesised on its own (own -p base pitch, SSML pitch range) and the phrases are
joined with explicit silences. espeak-ng's Mandarin contours are nearly flat within a phrase and
its SSML pitch changes inside one utterance land on the wrong clause, so wide pitch variation
and exact pauses are only reliable this way. Output is deterministic for a given espeak-ng build.
"""
from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specdec_core.audio import conditions

from specdec_core.audio import prosody
from specdec_core.audio.loading import TARGET_SR, load_audio  # noqa: E402

OUT_DIR = ROOT / "sample_audio"
JOIN_MS = 30         # gap between phrases that are spoken without a pause (< prosody.MIN_PAUSE_S)
EDGE_MS = 150        # silence kept at the start and end of a clip
TRIM_DB = -45.0      # espeak's own leading/trailing silence is cut at this level
ESPEAK_VERSION = "1.51"  # the build the shipped clips were made with (Debian bookworm)


def espeak_version() -> str:
    out = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"text-to-speech:\s*([\d.]+)", out)
    return m.group(1) if m else "unknown"


@dataclass
class Phrase:
    text: str
    p: int                   # espeak -p base pitch 0..99 for this phrase
    range: str = "medium"    # SSML prosody range (x-low .. x-high)
    pause_ms: int = JOIN_MS  # silence after the phrase


@dataclass
class Style:
    voice: str               # espeak-ng voice, always the Mandarin one (+ a speaker variant)
    s: int                   # -s speed, words per minute
    a: int                   # -a amplitude 0..200


@dataclass
class Clip:
    name: str
    label: str
    prompt_type: str
    style: Style
    phrases: list[Phrase]
    reference: str


# Per-emotion voice settings. Male base voice for low/mid pitch, a female variant where the
# profile wants high pitch (the male voice saturates near 165 Hz).
NEUTRAL = Style("cmn", s=175, a=95)
ANGRY = Style("cmn+f2", s=290, a=190)
HAPPY = Style("cmn+f5", s=190, a=85)
SAD = Style("cmn+m3", s=130, a=35)
WORRIED = Style("cmn", s=130, a=40)
SURPRISE = Style("cmn+f2", s=190, a=190)

CLIPS = [
    Clip("neutral_01", "neutral", "detailed", NEUTRAL,
         [Phrase("今天下午三点在二楼开会。", p=72, range="x-low")],
         "说话人音高适中，语调平稳少起伏，音量和语速都很正常，几乎没有停顿，整体情绪平静，只是在交代会议安排。"),
    Clip("neutral_02", "neutral", "detailed", NEUTRAL,
         [Phrase("这份报告我已经看完了。", p=72, range="x-low")],
         "声音音高中等，语调平直，语速适中，音量平稳，句子连贯没有明显停顿，情绪中性，说话人在客观陈述一件事。"),
    Clip("neutral_03", "neutral", "concise", NEUTRAL,
         [Phrase("我们明天早上九点出发。", p=72, range="x-low")],
         "语调平稳，语速适中，情绪平静。"),
    Clip("angry_01", "angry", "detailed", ANGRY,
         [Phrase("你怎么又迟到了！", p=30, range="x-high"),
          Phrase("我真的受够了！", p=95, range="x-high")],
         "说话人音调很高且起伏剧烈，音量很大，语速很快，几乎不停顿，语气急促强硬，情绪愤怒，因为对方一再迟到让他忍无可忍。"),
    Clip("angry_02", "angry", "detailed", ANGRY,
         [Phrase("别再说了！", p=72, range="x-high"),
          Phrase("这些废话我不想听！", p=40, range="x-high")],
         "声音高亢洪亮，音高变化大，语速急促，一口气说完没有停顿，带着明显的斥责语气，情绪生气，说话人不想再听对方解释。"),
    Clip("angry_03", "angry", "concise", ANGRY,
         [Phrase("这到底是谁干的！", p=40, range="x-high"),
          Phrase("给我站出来！", p=95, range="x-high")],
         "音调高亢，语速急促，情绪愤怒。"),
    Clip("happy_01", "happy", "detailed", HAPPY,
         [Phrase("太好了！", p=65, range="x-high"),
          Phrase("我们终于赢了！", p=45, range="x-high")],
         "说话人音调偏高，语调上扬且起伏明显，音量适中，语速轻快自然，语句连贯，情绪开心，因为团队终于赢得了比赛。"),
    Clip("happy_02", "happy", "detailed", HAPPY,
         [Phrase("今天天气真好，", p=35, range="x-high"),
          Phrase("我们去吃大餐吧！", p=95, range="x-high")],
         "声音明亮，音高较高，语调抑扬顿挫变化丰富，音量适中，语速正常，几乎没有停顿，情绪愉快，说话人在分享美好的一天。"),
    Clip("happy_03", "happy", "concise", HAPPY,
         [Phrase("谢谢你送的礼物，", p=30, range="x-high"),
          Phrase("我太喜欢了！", p=95, range="x-high")],
         "语调上扬，声音明亮，情绪高兴。"),
    Clip("sad_01", "sad", "detailed", SAD,
         [Phrase("他走了，", p=25, range="x-low", pause_ms=600),
          Phrase("真的，", p=25, range="x-low", pause_ms=600),
          Phrase("走了。", p=25, range="x-low")],
         "说话人音调低沉，语调平直缺少起伏，音量很小，语速缓慢，中间有长时间停顿，情绪悲伤，因为亲近的人离开了再也不会回来。"),
    Clip("sad_02", "sad", "detailed", SAD,
         [Phrase("我好累，", p=25, range="x-low", pause_ms=600),
          Phrase("真的，", p=25, range="x-low", pause_ms=600),
          Phrase("好累。", p=25, range="x-low")],
         "声音低沉无力，音高很低且变化很小，音量微弱，语速很慢，句中停顿较多，情绪难过，说话人感到孤独和疲惫。"),
    Clip("sad_03", "sad", "concise", SAD,
         [Phrase("对不起，", p=25, range="x-low", pause_ms=600),
          Phrase("是我，", p=25, range="x-low", pause_ms=600),
          Phrase("错了。", p=25, range="x-low")],
         "声音低沉，停顿很多，情绪悲伤。"),
    Clip("worried_01", "worried", "detailed", WORRIED,
         [Phrase("他还没到，", p=88, pause_ms=500),
          Phrase("会不会出事？", p=68)],
         "说话人音高中等，语调略有起伏，音量偏小，语速较慢，中间有些停顿，语气犹豫不安，情绪担忧，因为等的人迟迟没有到。"),
    Clip("worried_02", "worried", "detailed", WORRIED,
         [Phrase("明天考试，", p=66, pause_ms=500),
          Phrase("我没准备好。", p=96)],
         "声音偏轻，音高适中并有些波动，语速偏慢，句中有停顿，语气迟疑，情绪焦虑，说话人担心自己没有准备好明天的考试。"),
    Clip("worried_03", "worried", "concise", WORRIED,
         [Phrase("检查结果，", p=88, pause_ms=500),
          Phrase("还没出来吗？", p=68)],
         "声音偏轻，语速较慢，情绪担忧。"),
    Clip("surprise_01", "surprise", "detailed", SURPRISE,
         [Phrase("什么？你说什么？", p=78, range="x-high", pause_ms=350),
          Phrase("这是真的吗？", p=60, range="x-high")],
         "说话人音调突然升高，起伏很大，音量较大，语速适中，句中有停顿，带着明显的疑问语气，情绪惊讶，因为听到了意想不到的消息。"),
    Clip("surprise_02", "surprise", "detailed", SURPRISE,
         [Phrase("天哪，怎么会这样！", p=78, range="x-high", pause_ms=350),
          Phrase("这不可能！", p=30, range="x-high")],
         "声音高亢响亮，音高变化剧烈，语速正常，感叹之后有短暂停顿，语气难以置信，情绪吃惊，说话人没想到会发生这种事。"),
    Clip("surprise_03", "surprise", "concise", SURPRISE,
         [Phrase("哇，是你啊！", p=99, range="x-high", pause_ms=350),
          Phrase("你怎么来了？", p=25, range="x-high")],
         "音调突升，语气意外，情绪惊讶。"),
]


def synth_phrase(ph: Phrase, style: Style) -> np.ndarray:
    ssml = f'<speak><prosody range="{ph.range}">{ph.text}</prosody></speak>'
    cmd = ["espeak-ng", "-m", "-z", "-v", style.voice, "-p", str(ph.p), "-s", str(style.s),
           "-a", str(style.a), "--stdout", ssml]
    wav = subprocess.run(cmd, capture_output=True, check=True).stdout
    x = load_audio(wav).samples
    return trim(x)


def trim(x: np.ndarray) -> np.ndarray:
    hop = TARGET_SR // 100
    n = len(x) // hop
    db = 10 * np.log10(np.mean(x[: n * hop].reshape(n, hop) ** 2, axis=1) + 1e-12)
    loud = np.flatnonzero(db > TRIM_DB)
    if loud.size == 0:
        return x
    return x[loud[0] * hop:(loud[-1] + 1) * hop]


def synthesise(clip: Clip) -> np.ndarray:
    def silence(ms: int) -> np.ndarray:
        return np.zeros(TARGET_SR * ms // 1000, dtype=np.float32)

    parts = [silence(EDGE_MS)]
    for i, ph in enumerate(clip.phrases):
        parts.append(synth_phrase(ph, clip.style))
        parts.append(silence(EDGE_MS if i == len(clip.phrases) - 1 else ph.pause_ms))
    return np.concatenate(parts)


def hanzi(text: str) -> int:
    return len(re.findall(r"[\u4e00-\u9fff]", text))


def check_reference(clip: Clip) -> None:
    lo, hi = conditions.LENGTH_BANDS[clip.prompt_type]
    n = hanzi(clip.reference)
    if not lo <= n <= hi:
        raise SystemExit(f"{clip.name}: reference has {n} hanzi, band is {lo}-{hi}")
    named = {lab for lab, words in conditions.EMOTION_WORDS.items()
             for w in words if w in clip.reference}
    if named != {clip.label}:
        raise SystemExit(f"{clip.name}: reference names {sorted(named)}, expected {clip.label}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="print bins only, write nothing")
    args = ap.parse_args()

    if espeak_version() != ESPEAK_VERSION:
        print(f"warning: espeak-ng {espeak_version()} is not {ESPEAK_VERSION}; clips will differ "
              "from the shipped ones, check the bins below", file=sys.stderr)
    if not args.check:
        OUT_DIR.mkdir(exist_ok=True)
    rows, total_match = [], 0
    for clip in CLIPS:
        check_reference(clip)
        x = synthesise(clip)
        pcm = np.clip(np.round(x * 32767.0), -32768, 32767).astype(np.int16)
        if not args.check:
            sf.write(OUT_DIR / f"{clip.name}.wav", pcm, TARGET_SR, subtype="PCM_16")
        # Measure what a user of the shipped file gets: the 16-bit samples, not the floats.
        audio = load_audio((TARGET_SR, pcm))
        measured = prosody.extract(audio)
        profile = conditions.PROFILES[clip.label]
        match = sum(measured.bins[f] == profile[f] for f in conditions.FEATURES)
        total_match += match == len(conditions.FEATURES)
        print(f"{clip.name:12s} {audio.duration:4.1f}s {match}/5  {prosody.describe(measured)}")
        rows.append({"name": clip.name, "path": f"{clip.name}.wav", "label": clip.label,
                     "prompt_type": clip.prompt_type, "reference": clip.reference})
    print(f"{total_match}/{len(CLIPS)} clips match their profile on all 5 features")
    if not args.check:
        with open(OUT_DIR / "manifest.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=["name", "path", "label", "prompt_type", "reference"])
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
