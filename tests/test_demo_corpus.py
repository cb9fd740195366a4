"""The demo corpus grammar and the char-level tokenizer built from it."""
import itertools
import random

import pytest
from transformers import AutoTokenizer

from specdec_core.audio import conditions as C
from specdec_core.demo import corpus as K
from specdec_core.demo.tokenizer import save_tokenizer


def all_bin_combinations() -> list[dict[str, str]]:
    """Every combination of feature bins (243), earlier features varying slowest."""
    return [dict(zip(C.FEATURES, vs)) for vs in itertools.product(*C.FEATURES.values())]


@pytest.fixture(scope="module")
def examples():
    rng = random.Random(123)
    return [K.make_example(rng) for _ in range(3000)]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tok")
    save_tokenizer(folder)
    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


def test_lengths_within_band_and_one_sentence(examples):
    for ex in examples:
        lo, hi = C.LENGTH_BANDS[ex.prompt_type]
        assert lo <= K.count_hanzi(ex.text) <= hi, ex.text
        assert ex.text.endswith("。") and ex.text.count("。") == 1, ex.text


def test_both_prompt_types_and_all_labels_occur(examples):
    assert {ex.prompt_type for ex in examples} == set(C.PROMPT_TYPES)
    assert {ex.label for ex in examples} == set(C.LABELS)


def test_exactly_one_emotion_word_of_the_label(examples):
    for ex in examples:
        assert [lab for lab, _ in K.emotion_words_in(ex.text)] == [ex.label], ex.text


def test_information_first_order(examples):
    # Acoustic cues come before the emotion word, the reason after it.
    for ex in examples:
        _, word = K.emotion_words_in(ex.text)[0]
        at = ex.text.index(word)
        assert all(ex.text.index(p) < at for _, p in ex.cues), ex.text
        if ex.prompt_type == "detailed":
            assert any(lead in ex.text[at:] for lead in K.REASON_LEADS), ex.text


def test_cue_phrases_agree_with_bins(examples):
    for ex in examples:
        written = {f for f, _ in ex.cues}
        assert (1 if ex.prompt_type == "concise" else 3) <= len(written) <= 5
        hits = K.cue_hits(ex.text)
        assert {f for f, _, _ in hits} >= written
        for feat, b, phrase in hits:
            assert ex.bins[feat] == b, (phrase, ex.bins, ex.text)


def test_every_cue_combination_is_covered_and_labelled_by_the_rule():
    rng = random.Random(11)
    seen = {}
    for _ in range(6000):
        ex = K.make_example(rng)
        assert ex.label == C.label_for(ex.bins), (ex.bins, ex.label)
        seen.setdefault(tuple(ex.bins[f] for f in C.FEATURES), set()).add(ex.label)
    assert len(seen) == 3 ** 5 == len(all_bin_combinations())
    assert all(len(labels) == 1 for labels in seen.values())  # one emotion per cue combination


def test_label_rule_follows_arousal():
    # Loud, fast, wide-ranging speech is an aroused emotion; quiet, slow, flat speech is not.
    for combo in all_bin_combinations():
        loud_fast_wide = (combo["energy"], combo["rate"], combo["pvar"]) == ("high", "fast", "wide")
        quiet_slow_flat = (combo["energy"], combo["rate"], combo["pvar"]) == ("low", "slow", "flat")
        if loud_fast_wide:
            assert C.AROUSAL[C.label_for(combo)] == "high", combo
        if quiet_slow_flat:
            assert C.AROUSAL[C.label_for(combo)] == "low", combo
    for label, profile in C.PROFILES.items():
        assert C.label_for(profile) == label


def test_given_label_the_bins_agree_with_it():
    rng = random.Random(5)
    for label in C.LABELS:
        for _ in range(50):
            ex = K.make_example(rng, label=label)
            assert ex.label == label == C.label_for(ex.bins)


def test_bins_sampled_around_profiles():
    rng = random.Random(7)
    n = 4000
    typical = sum(K.sample_bins("angry", rng)["rate"] == "fast" for _ in range(n)) / n
    assert 0.7 < typical < 0.8
    # a neighbour, never two bins away
    assert all(K.sample_bins("sad", rng)["pitch"] != "high" for _ in range(500))


def test_documents_sometimes_continue_with_a_second_turn():
    rng = random.Random(3)
    docs = [K.document(rng)[0] for _ in range(400)]
    two = [d for d in docs if d.count("<|im_start|>user") == 2]
    assert 0.15 < len(two) / len(docs) < 0.45
    assert all(d.endswith("<|im_end|>") for d in docs)


def test_tokenizer_round_trip_on_corpus(tok):
    rng = random.Random(11)
    for _ in range(200):
        doc, _ = K.document(rng)
        ids = tok(doc)["input_ids"]
        assert tok.decode(ids) == doc


def test_every_corpus_character_is_one_token(tok):
    chars = sorted(K.charset())
    ids = [tok(c, add_special_tokens=False)["input_ids"] for c in chars]
    assert all(len(i) == 1 for i in ids), [c for c, i in zip(chars, ids) if len(i) != 1]
    assert [tok.decode(i) for i in ids] == chars


def test_text_outside_the_corpus_falls_back_to_bytes(tok):
    text = "Hello 世界 😀"
    assert tok.decode(tok(text)["input_ids"]) == text


def test_special_and_condition_tokens_are_single_ids(tok):
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<detailed>", "<concise>",
                *C.all_condition_tokens()]
    ids = [tok(s, add_special_tokens=False)["input_ids"] for s in specials]
    assert all(len(i) == 1 for i in ids)
    assert len({i[0] for i in ids}) == len(specials)
    assert tok.pad_token == tok.eos_token == "<|endoftext|>"


def test_skip_special_tokens_drops_markers_and_conditions(tok):
    prompt = K.prompt_text(C.condition_tokens(C.PROFILES["angry"]), "detailed")
    text = tok.decode(tok(prompt + "语速快。<|im_end|>")["input_ids"], skip_special_tokens=True)
    assert text == "system\n你是情感分析助手。\nuser\n请描述说话人的情绪。\nassistant\n语速快。"


def test_chat_template_matches_training_format(tok):
    msgs = [{"role": "system", "content": K.SYSTEM_PROMPT}, {"role": "user", "content": "x"}]
    out = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert out == (f"<|im_start|>system\n{K.SYSTEM_PROMPT}<|im_end|>\n"
                   "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n")
