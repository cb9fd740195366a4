"""Build sample_audio/heldout2/: the second held-out set (issue 21), made once, never tuned on.

    .venv/bin/python scripts/make_heldout2.py    # writes sample_audio/heldout2/*.wav + manifest.csv

Two kinds of clips, none of them in a voice, sentence or rendering used before:

* espeak-ng, rendered the way someone else would: ONE espeak-ng call per clip with a global base
  pitch, speed and amplitude per emotion (espeak's own punctuation pauses, no per-phrase pitch
  steps, no spliced silences), in twelve voice variants not used by scripts/make_samples.py; and
  six more in the per-phrase rendering of make_samples.py, in six further unused variants.
* real recorded human speech from Debian packages (calm read announcements; labelled neutral):
  alsa-utils' channel announcements (GPL-2, three separate utterances joined with 1 s gaps) and
  asterisk-core-sounds prompts (CC-BY-SA-3.0 / CC-BY-3.0, see SOURCES.md in that folder).

The settings below were written before any measurement of these clips and were not changed
after; docs/listening.md reports what the front end reads on them.
"""
from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import make_samples as ms  # noqa: E402
from specdec_core.audio.loading import TARGET_SR, load_audio  # noqa: E402

OUT = ROOT / "sample_audio" / "heldout2"

# One call per clip: (base pitch -p, speed -s wpm, amplitude -a, SSML range) per emotion.
GLOBAL = {
    "neutral": (50, 170, 100, "medium"),
    "angry": (68, 235, 185, "x-high"),
    "happy": (72, 190, 115, "x-high"),
    "sad": (28, 115, 45, "x-low"),
    "worried": (56, 130, 55, "medium"),
    "surprise": (82, 170, 170, "x-high"),
}

# name, label, voice, speed factor, text (one call)
ONE_CALL = [
    ("neutral_m2", "neutral", "cmn+m2", 1.0, "会议室已经预订好了，下午两点开始。"),
    ("neutral_andrea", "neutral", "cmn+Andrea", 0.9, "请把这份文件交给前台的同事。"),
    ("angry_m3", "angry", "cmn+m3", 1.1, "我说了多少遍了，不许再碰我的东西！"),
    ("angry_belinda", "angry", "cmn+belinda", 1.0, "你把事情搞砸了，还想怪别人！"),
    ("happy_f1", "happy", "cmn+f1", 1.0, "我考上大学了，爸爸妈妈都特别高兴！"),
    ("happy_m5", "happy", "cmn+m5", 0.9, "周末我们一起去海边玩吧！"),
    ("sad_klatt2", "sad", "cmn+klatt2", 1.0, "奶奶去世以后，家里一直很安静。"),
    ("sad_linda", "sad", "cmn+linda", 1.1, "我的梦想，好像永远实现不了了。"),
    ("worried_m6", "worried", "cmn+m6", 1.0, "飞机已经晚点两个小时了，会不会出问题？"),
    ("worried_steph", "worried", "cmn+steph", 0.9, "医生还没出来，手术到底顺不顺利？"),
    ("surprise_klatt4", "surprise", "cmn+klatt4", 1.0, "什么？你一个人把房子装修好了？"),
    ("surprise_jacky", "surprise", "cmn+Jacky", 1.1, "不会吧！这么多礼物都是给我的？"),
]

# The per-phrase rendering of make_samples.py (its STYLES), in six other variants and sentences.
PER_PHRASE = [
    ms._c("neutral_m8", "neutral", "detailed", ["明天的航班改到了上午十点。"], "", 0.95, "cmn+m8"),
    ms._c("angry_m4", "angry", "detailed", ["谁让你动我的电脑！", "马上给我恢复原样！"], "", 1.05, "cmn+m4"),
    ms._c("happy_alicia", "happy", "detailed", ["我们的小宝宝出生了，", "是个女孩！"], "", 1.0, "cmn+Alicia"),
    ms._c("sad_klatt5", "sad", "detailed", ["我们，", "就这样，", "分手吧。"], "", 1.0, "cmn+klatt5"),
    ms._c("worried_andy", "worried", "detailed", ["钱包不见了，", "里面还有身份证。"], "", 1.0, "cmn+Andy"),
    ms._c("surprise_grandpa", "surprise", "detailed", ["你也在这里？", "太巧了吧！"], "", 0.95, "cmn+grandpa"),
]

# Real recorded speech: (name, speaker, files joined by 1 s of silence). Calm reading: neutral.
ALSA = Path("/usr/share/sounds/alsa")
AST = Path("/usr/share/asterisk/sounds")
REAL = [
    ("real_alsa_f", "alsa-utils (female, en)", [ALSA / f"{s}.wav" for s in ("Front_Left", "Front_Center", "Front_Right")]),
    ("real_allison_en_1", "Allison Smith (female, en)", [AST / "en_US_f_Allison/queue-periodic-announce.wav"]),
    ("real_allison_en_2", "Allison Smith (female, en)", [AST / "en_US_f_Allison/vm-instructions.wav"]),
    ("real_allison_es", "Allison Smith (female, es)", [AST / "es_MX_f_Allison/dir-instr.wav"]),
    ("real_june_fr", "June Wallack (female, fr)", [AST / "fr_CA_f_June/vm-intro.wav"]),
    ("real_carlo_it_1", "Carlo Flora (male, it)", [AST / "it_IT_m_Carlo/vm-review.wav"]),
    ("real_carlo_it_2", "Carlo Flora (male, it)", [AST / "it_IT_m_Carlo/vm-instructions.wav"]),
    ("real_ivr_ru", "IvrvoiceRU (female, ru)", [AST / "ru_RU_f_IvrvoiceRU/demo-echotest.wav"]),
]
GAP_S = 1.0


def one_call(voice: str, label: str, speed: float, text: str) -> np.ndarray:
    p, s, a, rng = GLOBAL[label]
    ssml = f'<speak><prosody range="{rng}">{text}</prosody></speak>'
    cmd = ["espeak-ng", "-m", "-z", "-v", voice, "-p", str(p), "-s", str(int(round(s * speed))),
           "-a", str(a), "--stdout", ssml]
    wav = subprocess.run(cmd, capture_output=True, check=True).stdout
    x = ms.trim(load_audio(wav).samples)
    edge = np.zeros(TARGET_SR * ms.EDGE_MS // 1000, np.float32)
    return np.concatenate([edge, x, edge])


def real(files: list[Path]) -> np.ndarray:
    gap = np.zeros(int(GAP_S * TARGET_SR), np.float32)
    parts = []
    for i, f in enumerate(files):
        parts += ([gap] if i else []) + [load_audio(f).samples]
    return np.concatenate(parts)


def build() -> list[dict]:
    rows = []
    for name, label, voice, speed, text in ONE_CALL:
        rows.append(dict(name=name, label=label, speaker=voice, kind="espeak-ng one call",
                         source=f"{voice} -p{GLOBAL[label][0]} x{speed}", x=one_call(voice, label, speed, text)))
    for clip in PER_PHRASE:
        rows.append(dict(name=clip.name, label=clip.label, speaker=clip.voice, kind="espeak-ng per phrase",
                         source=f"{clip.voice} x{clip.speed}", x=ms.synthesise(clip)))
    for name, speaker, files in REAL:
        rows.append(dict(name=name, label="neutral", speaker=speaker, kind="recorded",
                         source=" + ".join(f"{f.parent.name}/{f.name}" for f in files), x=real(files)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    rows = build()
    with open(OUT / "manifest.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["name", "path", "label", "prompt_type", "reference",
                                          "speaker", "kind", "source"])
        w.writeheader()
        for r in rows:
            pcm = np.clip(np.round(r["x"] * 32767.0), -32768, 32767).astype(np.int16)
            sf.write(OUT / f"{r['name']}.wav", pcm, TARGET_SR, subtype="PCM_16")
            w.writerow({"name": r["name"], "path": f"{r['name']}.wav", "label": r["label"],
                        "prompt_type": "detailed", "reference": "", "speaker": r["speaker"],
                        "kind": r["kind"], "source": r["source"]})
            print(f"{r['name']:18s} {len(pcm) / TARGET_SR:4.1f}s {r['source']}")


if __name__ == "__main__":
    main()
