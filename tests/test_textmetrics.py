"""Text metrics on hand-made strings; every expected value is worked out in the comment."""
from __future__ import annotations

import pytest

from specdec_core.analysis.textmetrics import LEAK_MARKERS, text_metrics


def test_seed_loop_text():
    m = text_metrics("音色中，音色中，音色中，")
    assert m["hanzi_count"] == 9
    assert m["char_count"] == 12 and m["punct_count"] == 3
    assert m["punct_density"] == pytest.approx(3 / 12)
    # c = 音色中音色中音色中: bigrams 音色 色中 中音 音色 色中 中音 音色 色中 -> 8, 3 distinct,
    # 5 repeated; trigrams 音色中 色中音 中音色 音色中 色中音 中音色 音色中 -> 7, 3 distinct, 4 repeated
    assert m["repeat_rate_2"] == pytest.approx(5 / 8)
    assert m["repeat_rate_3"] == pytest.approx(4 / 7)
    assert m["repeat_rate"] == pytest.approx(9 / 15)
    assert m["adjacent_repeats"] == 0
    assert m["template_leak"] is False and m["leak_markers"] == []


def test_normal_sentence_has_no_repeats():
    m = text_metrics("说话人语速较慢，音调平稳。")
    # 11 hanzi, 2 punctuation, 13 chars; c = 说话人语速较慢音调平稳: all 10 bigrams and 9 trigrams distinct
    assert (m["hanzi_count"], m["punct_count"], m["char_count"]) == (11, 2, 13)
    assert m["punct_density"] == pytest.approx(2 / 13)
    assert m["repeat_rate"] == 0.0 and m["adjacent_repeats"] == 0


def test_punctuation_is_stripped_before_ngrams():
    # c = 停顿停顿 (the comma between does not break the repeat)
    # bigrams 停顿 顿停 停顿 -> 1 of 3 repeated; trigrams 停顿停 顿停顿 -> 0 of 2
    m = text_metrics("停顿，停顿")
    assert m["repeat_rate_2"] == pytest.approx(1 / 3)
    assert m["repeat_rate_3"] == 0.0
    assert m["repeat_rate"] == pytest.approx(1 / 5)


def test_adjacent_repeats_count_cjk_pairs_in_raw_text():
    assert text_metrics("慢慢地")["adjacent_repeats"] == 1
    assert text_metrics("哈哈哈")["adjacent_repeats"] == 2
    assert text_metrics("音，音")["adjacent_repeats"] == 0     # not adjacent in the text
    assert text_metrics("，，，aa")["adjacent_repeats"] == 0    # only CJK chars count
    # 哈哈哈: c = 哈哈哈, bigrams 哈哈 哈哈 -> 1 of 2; trigram 哈哈哈 -> 0 of 1
    assert text_metrics("哈哈哈")["repeat_rate"] == pytest.approx(1 / 3)


def test_punct_density_is_per_character_and_ignores_spaces():
    # "好，，，，" : 5 chars, 4 punctuation
    assert text_metrics("好，，，，")["punct_density"] == pytest.approx(4 / 5)
    # spaces and newlines are not characters here; ASCII and full-width punctuation both count;
    # "Hi, ok." -> solid chars H i , o k . = 6, punct 2
    assert text_metrics("Hi, ok.")["punct_density"] == pytest.approx(2 / 6)
    # “”（）… count as punctuation too: 7 chars, 5 punctuation
    assert text_metrics("“好”（嗯）…")["punct_density"] == pytest.approx(5 / 7)


@pytest.mark.parametrize("text, markers", [
    ("说话人情绪平静。Human: 请继续", ["Human"]),
    ("情绪平静。<|im_end|>", ["<|im_"]),
    ("情绪平静。<|im_end|>\n<|im_start|>assistant\n", ["assistant", "<|im_"]),
    ("平静。\nuser\n再说一遍", ["user\n"]),
    ("User: hi", ["User"]),
    ("平静。<|endoftext|>", ["<|endoftext|>"]),
    ("说话人情绪平静，用户说得很慢。", []),
    ("the human voice", []),                     # case-sensitive: lower-case "human" is text
])
def test_template_leak(text, markers):
    m = text_metrics(text)
    assert m["leak_markers"] == markers
    assert m["template_leak"] is bool(markers)
    assert set(markers) <= set(LEAK_MARKERS)


def test_empty_and_no_cjk():
    m = text_metrics("")
    assert m["hanzi_count"] == 0 and m["punct_density"] == 0.0 and m["repeat_rate"] == 0.0
    assert m["adjacent_repeats"] == 0 and m["template_leak"] is False
    m = text_metrics("   \n")
    assert m["char_count"] == 0 and m["punct_density"] == 0.0
    assert text_metrics("好")["repeat_rate"] == 0.0
