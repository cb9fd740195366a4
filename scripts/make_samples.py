"""Synthesise the sample clips in sample_audio/ with espeak-ng's Mandarin voice.

    .venv/bin/python scripts/make_samples.py            # writes sample_audio/*.wav + manifest.csv
    .venv/bin/python scripts/make_samples.py --check    # only prints extracted bins vs profile

Each emotion gets its own pitch, pitch range, speed, amplitude and pauses, chosen (together with
the thresholds in specdec_core/audio/prosody.py) so that prosody.extract() lands on the label's
PROFILES entry (devtools/demo_corpus.py): that is what lets the demo model "hear" the emotion.

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

from devtools import demo_corpus  # noqa: E402
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


# Emotion styles, RELATIVE to the voice: a pitch offset per phrase (added to espeak's default
# base pitch -p 50, so a female voice stays a female voice), an SSML pitch range, speed (wpm,
# scaled per clip), amplitude and the pause between phrases. Aroused emotions: higher, wider,
# louder (angry also fast); low-arousal ones: lower or flat, quiet, slow, with pauses.
@dataclass
class Style:
    steps: tuple             # -p offset for phrase 1, 2, ... (cycled)
    range: str               # SSML prosody range
    s: int                   # -s speed, words per minute (times Clip.speed)
    a: int                   # -a amplitude 0..200
    pause_ms: int            # silence between phrases


STYLES = {
    "neutral": Style((0,), "x-low", 175, 95, JOIN_MS),
    "angry": Style((10, 45), "x-high", 280, 190, JOIN_MS),
    "happy": Style((-5, 45), "x-high", 190, 85, JOIN_MS),
    "sad": Style((-25,), "x-low", 125, 35, 600),
    "worried": Style((0, 20), "medium", 130, 40, 500),
    "surprise": Style((40, 5), "x-high", 190, 190, 350),
}
BASE_P = 50


@dataclass
class Clip:
    name: str
    label: str
    prompt_type: str
    voice: str               # espeak-ng voice: the Mandarin one + a speaker variant
    phrases: list[str]
    reference: str
    speed: float = 1.0       # speaking-rate factor on top of the style's speed

    @property
    def style(self) -> Style:
        return STYLES[self.label]


# Three voices for the shipped clips (the calibration set of prosody.py): a male, two female.
VOICES = {"01": "cmn", "02": "cmn+f2", "03": "cmn+f5"}


def _c(name, label, prompt_type, phrases, reference, speed=1.0, voice=None):
    return Clip(name, label, prompt_type, voice or VOICES[name[-2:]], phrases, reference, speed)


CLIPS = [
    _c("neutral_01", "neutral", "detailed", ["今天下午三点在二楼开会。"],
       "说话人音高适中，语调平稳少起伏，音量和语速都很正常，几乎没有停顿，整体情绪平静，只是在交代会议安排。"),
    _c("neutral_02", "neutral", "detailed", ["这份报告我已经看完了。"],
       "声音音高中等，语调平直，语速适中，音量平稳，句子连贯没有明显停顿，情绪中性，说话人在客观陈述一件事。", 0.95),
    _c("neutral_03", "neutral", "concise", ["我们明天早上九点出发。"],
       "语调平稳，语速适中，情绪平静。", 1.05),
    _c("angry_01", "angry", "detailed", ["你怎么又迟到了！", "我真的受够了！"],
       "说话人音调很高且起伏剧烈，音量很大，语速很快，几乎不停顿，语气急促强硬，情绪愤怒，因为对方一再迟到让他忍无可忍。"),
    _c("angry_02", "angry", "detailed", ["别再说了！", "这些废话我不想听！"],
       "声音高亢洪亮，音高变化大，语速急促，一口气说完没有停顿，带着明显的斥责语气，情绪生气，说话人不想再听对方解释。", 1.05),
    _c("angry_03", "angry", "concise", ["这到底是谁干的！", "给我站出来！"],
       "音调高亢，语速急促，情绪愤怒。", 0.95),
    _c("happy_01", "happy", "detailed", ["太好了！", "我们终于赢了！"],
       "说话人音调偏高，语调上扬且起伏明显，音量适中，语速轻快自然，语句连贯，情绪开心，因为团队终于赢得了比赛。"),
    _c("happy_02", "happy", "detailed", ["今天天气真好，", "我们去吃大餐吧！"],
       "声音明亮，音高较高，语调抑扬顿挫变化丰富，音量适中，语速正常，几乎没有停顿，情绪愉快，说话人在分享美好的一天。", 0.95),
    _c("happy_03", "happy", "concise", ["谢谢你送的礼物，", "我太喜欢了！"],
       "语调上扬，声音明亮，情绪高兴。", 1.05),
    _c("sad_01", "sad", "detailed", ["他走了，", "真的，", "走了。"],
       "说话人音调低沉，语调平直缺少起伏，音量很小，语速缓慢，中间有长时间停顿，情绪悲伤，因为亲近的人离开了再也不会回来。"),
    _c("sad_02", "sad", "detailed", ["我好累，", "真的，", "好累。"],
       "声音低沉无力，音高很低且变化很小，音量微弱，语速很慢，句中停顿较多，情绪难过，说话人感到孤独和疲惫。", 1.05),
    _c("sad_03", "sad", "concise", ["对不起，", "是我，", "错了。"],
       "声音低沉，停顿很多，情绪悲伤。", 0.95),
    _c("worried_01", "worried", "detailed", ["他还没到，", "会不会出事？"],
       "说话人音高中等，语调略有起伏，音量偏小，语速较慢，中间有些停顿，语气犹豫不安，情绪担忧，因为等的人迟迟没有到。"),
    _c("worried_02", "worried", "detailed", ["明天考试，", "我没准备好。"],
       "声音偏轻，音高适中并有些波动，语速偏慢，句中有停顿，语气迟疑，情绪焦虑，说话人担心自己没有准备好明天的考试。", 0.95),
    _c("worried_03", "worried", "concise", ["检查结果，", "还没出来吗？"],
       "声音偏轻，语速较慢，情绪担忧。", 1.05),
    _c("surprise_01", "surprise", "detailed", ["什么？你说什么？", "这是真的吗？"],
       "说话人音调突然升高，起伏很大，音量较大，语速适中，句中有停顿，带着明显的疑问语气，情绪惊讶，因为听到了意想不到的消息。"),
    _c("surprise_02", "surprise", "detailed", ["天哪，怎么会这样！", "这不可能！"],
       "声音高亢响亮，音高变化剧烈，语速正常，感叹之后有短暂停顿，语气难以置信，情绪吃惊，说话人没想到会发生这种事。", 1.05),
    _c("surprise_03", "surprise", "concise", ["哇，是你啊！", "你怎么来了？"],
       "音调突升，语气意外，情绪惊讶。", 0.95),
]

# Held out from calibration and from every threshold choice: other voices, other sentences,
# other speeds. tests/test_heldout_voices.py scores the pipeline on these.
HELDOUT_DIR = OUT_DIR / "unheard"
HELDOUT = [
    _c("neutral_m1", "neutral", "detailed", ["这个包裹请放在门口的桌子上。"],
       "", 1.1, "cmn+m1"),
    _c("angry_f3", "angry", "detailed", ["你为什么不早点告诉我！", "现在全都来不及了！"],
       "", 0.9, "cmn+f3"),
    _c("happy_m7", "happy", "detailed", ["我们下个月就要结婚了，", "真是太棒了！"],
       "", 1.1, "cmn+m7"),
    _c("sad_f4", "sad", "detailed", ["那只小猫，", "再也，", "回不来了。"],
       "", 0.9, "cmn+f4"),
    _c("worried_klatt3", "worried", "detailed", ["天已经黑了，", "孩子怎么还没回家？"],
       "", 1.1, "cmn+klatt3"),
    _c("surprise_annie", "surprise", "detailed", ["真的吗？你中奖了？", "一百万？"],
       "", 0.9, "cmn+Annie"),
]


def synth_phrase(text: str, clip: Clip, i: int) -> np.ndarray:
    st = clip.style
    p = min(99, max(0, BASE_P + st.steps[i % len(st.steps)]))
    ssml = f'<speak><prosody range="{st.range}">{text}</prosody></speak>'
    cmd = ["espeak-ng", "-m", "-z", "-v", clip.voice, "-p", str(p),
           "-s", str(int(round(st.s * clip.speed))), "-a", str(st.a), "--stdout", ssml]
    wav = subprocess.run(cmd, capture_output=True, check=True).stdout
    return trim(load_audio(wav).samples)


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
    for i, text in enumerate(clip.phrases):
        parts.append(synth_phrase(text, clip, i))
        last = i == len(clip.phrases) - 1
        parts.append(silence(EDGE_MS if last else clip.style.pause_ms))
    return np.concatenate(parts)


def hanzi(text: str) -> int:
    return len(re.findall(r"[\u4e00-\u9fff]", text))


def check_reference(clip: Clip) -> None:
    if not clip.reference:
        return
    lo, hi = conditions.LENGTH_BANDS[clip.prompt_type]
    n = hanzi(clip.reference)
    if not lo <= n <= hi:
        raise SystemExit(f"{clip.name}: reference has {n} hanzi, band is {lo}-{hi}")
    named = {lab for lab, words in conditions.EMOTION_WORDS.items()
             for w in words if w in clip.reference}
    if named != {clip.label}:
        raise SystemExit(f"{clip.name}: reference names {sorted(named)}, expected {clip.label}")


def write_set(clips: list[Clip], out_dir: Path, write: bool) -> tuple[int, int]:
    """Synthesise, measure (as a user of the 16-bit file would) and, with write, save the WAVs
    and manifest.csv. Returns (clips whose rule label is right, clips)."""
    rows, right = [], 0
    for clip in clips:
        check_reference(clip)
        pcm = np.clip(np.round(synthesise(clip) * 32767.0), -32768, 32767).astype(np.int16)
        if write:
            out_dir.mkdir(parents=True, exist_ok=True)
            sf.write(out_dir / f"{clip.name}.wav", pcm, TARGET_SR, subtype="PCM_16")
        audio = load_audio((TARGET_SR, pcm))
        measured = prosody.extract(audio)
        said = demo_corpus.label_for(measured.bins)
        right += said == clip.label
        print(f"{clip.name:15s} {clip.voice:11s} {audio.duration:4.1f}s -> {said:8s} "
              f"{'ok ' if said == clip.label else 'BAD'} {prosody.describe(measured)}")
        rows.append({"name": clip.name, "path": f"{clip.name}.wav", "label": clip.label,
                     "prompt_type": clip.prompt_type, "reference": clip.reference})
    if write:
        with open(out_dir / "manifest.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=["name", "path", "label", "prompt_type", "reference"])
            w.writeheader()
            w.writerows(rows)
    return right, len(clips)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="print bins only, write nothing")
    ap.add_argument("--heldout", action="store_true",
                    help="with --check, also measure the held-out clips (not for tuning)")
    args = ap.parse_args()

    if espeak_version() != ESPEAK_VERSION:
        print(f"warning: espeak-ng {espeak_version()} is not {ESPEAK_VERSION}; clips will differ "
              "from the shipped ones, check the bins below", file=sys.stderr)
    sets = [("calibration (shipped samples)", CLIPS, OUT_DIR)]
    if not args.check or args.heldout:
        sets.append(("held out (unheard voices and sentences)", HELDOUT, HELDOUT_DIR))
    for title, clips, out in sets:
        right, n = write_set(clips, out, not args.check)
        print(f"{title}: rule label right on {right}/{n}\n")


if __name__ == "__main__":
    main()
