"""Cycle detector: synthetic streams with and without cycles for every period 1-8, the exact push
at which a cycle is reported, streaming == offline, would_extend, and no false alarm on normal
Chinese descriptions (char ids = code points, as in a char-level vocabulary)."""
from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest

from specdec_core.decoding.cycles import Cycle, CycleDetector
from specdec_core.errors import ConfigError


def cps(text: str) -> list[int]:
    return [ord(c) for c in text]


def txt(ids) -> str:
    return "".join(map(chr, ids))


def need(p: int) -> int:
    """Default rule, restated: period 1 needs 4 tokens, longer periods 3 full repeats."""
    return 4 if p == 1 else 3 * p


def primitive_pattern(p: int, rnd: random.Random) -> list[int]:
    """A pattern whose smallest period is p (distinct ids 100..199, so never in the prefix)."""
    while True:
        pat = [rnd.randrange(100, 100 + max(2, p)) for _ in range(p)]
        if p == 1 or all(pat != pat[d:] + pat[:d] for d in range(1, p)):
            return pat


def aperiodic_prefix(n: int) -> list[int]:
    return list(range(1000, 1000 + n))  # all distinct: no period at all


@pytest.mark.parametrize("p", range(1, 9))
@pytest.mark.parametrize("seed", range(5))
def test_each_period_is_reported_at_the_right_push(p, seed):
    rnd = random.Random(seed * 10 + p)
    pat = primitive_pattern(p, rnd)
    pre = aperiodic_prefix(rnd.randint(0, 12))
    stream = pre + pat * 6 + aperiodic_prefix(3)
    det = CycleDetector()
    reports = [(i, c) for i, t in enumerate(stream) if (c := det.push(t)) is not None]
    assert len(reports) == 1
    at, cyc = reports[0]
    assert at == len(pre) + need(p) - 1                  # the push that completes the rule
    assert (cyc.start, cyc.period, cyc.pattern_ids) == (len(pre), p, pat)
    assert cyc.end == len(pre) + 6 * p                   # extended while it lasted, then closed
    assert det.current is None and det.cycles == [cyc]
    assert det.detect(stream) == [cyc]


@pytest.mark.parametrize("p", range(1, 9))
def test_one_repeat_short_is_not_a_cycle(p):
    pat = primitive_pattern(p, random.Random(p))
    stream = aperiodic_prefix(5) + (pat * 4)[:need(p) - 1] + aperiodic_prefix(5)
    assert CycleDetector().detect(stream) == []
    # and one more token of the pattern makes it one
    stream = aperiodic_prefix(5) + (pat * 4)[:need(p)] + aperiodic_prefix(5)
    assert [c.period for c in CycleDetector().detect(stream)] == [p]


def test_smallest_period_is_reported():
    # "abab..." is periodic with 2, 4, 6, 8; "，，，，" with every period
    assert [c.period for c in CycleDetector().detect(cps("xyabababababab"))] == [2]
    assert [c.period for c in CycleDetector().detect(cps("说话，，，，，，，，"))] == [1]


def test_pattern_starts_where_the_periodic_part_starts():
    # seed 002/003: the loop begins mid-word, in "音色音色中，…"
    text = "说话人说话时语速较慢，音调平稳，停顿停顿，音量适中，音色音色中，音色中，音色中，音色中，音色"
    cycles = CycleDetector().detect(cps(text))
    assert len(cycles) == 1
    c = cycles[0]
    assert c.period == 4 and txt(c.pattern_ids) == "音色中，"
    assert text[c.start:c.end] == "音色中，音色中，音色中，音色中，音色"
    w = c.warning(txt(c.pattern_ids))      # the trace's entry (decoding/steps.py)
    assert (w["period"], w["end"] - w["start"], w["text"]) == (4, 18, "音色中，")


def test_seed_examples_are_caught():
    assert [c.period for c in CycleDetector().detect(cps("音色中，音色中，音色中，"))] == [4]
    assert [c.period for c in CycleDetector().detect(cps("，，，，"))] == [1]
    sample2 = ("说话人用缓慢的语速，音调平稳，音量强弱，停顿与连贯度，连贯度，音色音色，紧张度，紧张度，"
               "情绪，情绪情绪，情绪，情绪情绪，情绪，情绪情绪，情绪，情绪情绪，，情绪情绪，，，")
    assert CycleDetector().detect(cps(sample2))


NORMAL = [
    "说话人语速较慢，音调平稳，音量适中，整体情绪平静。",
    "说话人说话时语速较慢，声音低沉，停顿较多，听起来有些疲惫和失落。",
    "说话人慢慢地说着，语气温和，音调略低，情绪显得有些难过。",
    "说话人语速很快，音量较大，语调起伏明显，带有愤怒的情绪，说话时咬字很重。",
    "说话人声音洪亮，语调上扬，笑声不断，情绪非常开心，整体听起来轻松愉快。",
    "说话人的语速忽快忽慢，音调时高时低，声音有些颤抖，流露出担心和不安。",
    "说话人突然提高音量，语调急促上扬，显得十分惊讶，说话人说话时停顿很短。",
    "说话人语气平淡，音色中性，语速适中，没有明显的情绪波动。",
    "音调较高，语速较快，音量较大，情绪激动。",
    "说话人一点一点地讲述，语速缓慢，声音轻柔，情绪低落，常常叹气。",
    "他说：“好的好的，我知道了。”语气平和。",
    "语速平稳，音调偏低，停顿自然，情绪中性。",
]


@pytest.mark.parametrize("text", NORMAL)
def test_no_false_alarm_on_normal_descriptions(text):
    det = CycleDetector()
    assert det.detect(cps(text)) == []
    assert not any(det.would_extend(cps(text[:i]), ord(text[i])) for i in range(len(text)))


MANIFEST = Path(__file__).resolve().parents[1] / "sample_audio" / "manifest.csv"


def test_no_false_alarm_on_any_sample_clip_reference():
    refs = [r["reference"] for r in csv.DictReader(MANIFEST.open(encoding="utf-8")) if r["reference"]]
    assert len(refs) >= 6
    for text in refs:
        assert CycleDetector().detect(cps(text)) == [], text


def test_no_false_alarm_on_demo_corpus_descriptions():
    from devtools.demo_corpus import make_example

    rnd = random.Random(0)
    texts = [make_example(rnd).text for _ in range(1000)]
    assert sum(map(len, texts)) > 20_000
    assert [t for t in texts if CycleDetector().detect(cps(t))] == []


def test_streaming_and_offline_agree_on_random_streams():
    rnd = random.Random(7)
    for _ in range(200):
        stream = []
        while len(stream) < 120:
            if rnd.random() < 0.3:
                p = rnd.randint(1, 8)
                pat = [rnd.randrange(5) for _ in range(p)]
                stream += pat * rnd.randint(1, 5)
            else:
                stream += [rnd.randrange(20) for _ in range(rnd.randint(1, 6))]
        det = CycleDetector()
        new = [c for t in stream if (c := det.push(t))]
        assert new == det.cycles == CycleDetector().detect(stream)
        for c in det.cycles:
            seg = stream[c.start:c.end]
            assert all(seg[i] == seg[i - c.period] for i in range(c.period, len(seg)))
            assert seg[:c.period] == c.pattern_ids
            assert len(seg) >= need(c.period)
            # maximal: the token before does not continue it, nor the one after
            assert c.start == 0 or stream[c.start - 1] != stream[c.start - 1 + c.period]
            assert c.end == len(stream) or stream[c.end] != stream[c.end - c.period]


def test_would_extend_matches_streaming():
    rnd = random.Random(3)
    det = CycleDetector()
    for _ in range(300):
        stream = [rnd.randrange(4) for _ in range(rnd.randint(0, 40))]
        t = rnd.randrange(4)
        live = CycleDetector()
        for x in stream:
            live.push(x)
        live.push(t)
        # t creates or continues a cycle exactly when the streaming detector has one ending at t
        expected = live.current is not None and live.current.end == len(stream) + 1
        assert det.would_extend(stream, t) == expected, (stream, t)


def test_would_extend_examples():
    det = CycleDetector()
    loop = cps("音色中，音色中，音色中")
    assert det.would_extend(loop, ord("，"))            # creates the third repeat
    assert not det.would_extend(loop, ord("慢"))
    assert not det.would_extend(cps("，，"), ord("，"))
    assert det.would_extend(cps("，，，"), ord("，"))
    assert det.would_extend(cps("x") * 100, ord("x"))   # continues, looks at a bounded tail only
    assert det.tail_needed == 23


def test_current_cycle_extends_and_push_returns_none():
    det = CycleDetector()
    out = [det.push(t) for t in cps("ab，，，，，，c")]
    assert [o is not None for o in out] == [False] * 5 + [True] + [False] * 3
    assert det.cycles == [Cycle(2, 8, 1, [ord("，")])]
    assert det.current is None   # "c" ended it
    det.reset()
    assert det.n == 0 and det.cycles == []


def test_per_push_state_is_bounded():
    det = CycleDetector()
    for i in range(10_000):
        det.push(i % 3)
    assert len(det._buf) == det.max_period
    assert len(det.cycles) == 1 and det.cycles[0].end == 10_000


def test_custom_rules_and_bad_arguments():
    det = CycleDetector(min_repeats=2, max_period=4, min_span=6)
    assert det.detect(cps("xy停顿停顿z")) == []            # span 4 < min_span
    assert [c.period for c in det.detect(cps("xy紧张度紧张度z"))] == [3]
    assert CycleDetector(max_period=3).detect(cps("音色中，音色中，音色中，")) == []
    for kw in ({"min_repeats": 1}, {"max_period": 0}, {"min_span": 1}):
        with pytest.raises(ConfigError):
            CycleDetector(**kw)
