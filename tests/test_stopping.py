"""Stopping by token id: EOS list, first sentence after min_new_tokens, max tokens; for a
char-level vocabulary and for a byte-level BPE where 。 is merged into bigger tokens; the
decoder's StopChecker and model.generate with criteria() stop at the same token."""
from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LogitsProcessor, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from specdec_core.errors import ConfigError
from specdec_core.decoding.stopping import EosIdStop, FirstSentenceStop, StopChecker
from tiny import word_level
from specdec_core.decoding.vocab import TokenClasses

torch.set_num_threads(1)

CHARS = "说话人时语速较慢音调平稳量适中色停顿好天气很情绪" + "，。、：:；！？,.!?;"


def char_tokenizer() -> PreTrainedTokenizerFast:
    return word_level(["<pad>", "<eos>", "<|im_end|>"], CHARS, unk_token="<pad>", pad_token="<pad>",
                      eos_token="<eos>")


def bpe_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level BPE (like Qwen's) trained so that merges cross punctuation: "很好。" is one
    token, and 。 alone is another."""
    corpus = ["说话人语速较慢，音调平稳，情绪很好。", "今天天气很好。", "声音很好。心情不错。",
              "Hello world. It is good."] * 50
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>", "<|im_end|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>")


CHAR = char_tokenizer()
BPE = bpe_tokenizer()


def t(ids_list):
    return torch.tensor(ids_list)


def test_eos_id_stop_by_id_only():
    stop = EosIdStop([1, 2])
    assert stop(t([[5, 6, 1], [5, 6, 7], [2, 2, 2]]), None).tolist() == [True, False, True]
    assert EosIdStop(2)(t([[9, 2]]), None).tolist() == [True]
    assert EosIdStop([])(t([[9, 2]]), None).tolist() == [False]


def test_first_sentence_char_vocab():
    cls = TokenClasses.for_tokenizer(CHAR)
    period, dot = CHAR.convert_tokens_to_ids("。"), CHAR.convert_tokens_to_ids(".")
    assert set(cls.ids("sentence_end")) == {period, dot}
    prompt = CHAR.encode("说话人")
    stop = FirstSentenceStop(cls, prompt_len=len(prompt), min_new_tokens=4)
    gen = lambda s: t([prompt + CHAR.encode(s)])
    assert not stop(gen("慢。"), None)[0]            # 2 new tokens < 4
    assert not stop(gen("语速较慢"), None)[0]         # long enough, not a sentence end
    assert stop(gen("语速较。"), None)[0]             # 4th new token is 。
    assert stop(gen("语速慢，较."), None)[0]
    assert not stop(gen("语速较。慢"), None)[0]
    batch = t([prompt + CHAR.encode("语速较。"), prompt + CHAR.encode("语速较慢")])
    assert stop(batch, None).tolist() == [True, False]


def test_bpe_vocab_where_the_period_is_merged():
    cls = TokenClasses.for_tokenizer(BPE)
    merged = BPE.encode("很好。")
    assert len(merged) == 1 and BPE.decode(merged) == "很好。"       # 。 lives inside a bigger token
    lone = BPE.encode("。")
    assert len(lone) == 1 and merged[0] != lone[0]
    ends = set(cls.ids("sentence_end"))
    assert {merged[0], lone[0]} <= ends
    assert all(("。" in cls.texts[i] or "." in cls.texts[i]) for i in ends)
    assert not any(("。" in s or "." in s) for i, s in enumerate(cls.texts) if i not in ends)

    prompt = BPE.encode("说话人")
    seq = prompt + BPE.encode("今天天气很好。")
    assert seq[-1] == merged[0]
    stop = FirstSentenceStop(cls, prompt_len=len(prompt), min_new_tokens=1)
    assert stop(t([seq]), None)[0]
    # The seed's lookup (encode("。")[-1]) would have kept going on this token.
    assert not FirstSentenceStop(lone, len(prompt), 1)(t([seq]), None)[0]
    chk = StopChecker([BPE.convert_tokens_to_ids("<|im_end|>")], cls, len(prompt), 1, 50)
    assert chk.check(len(seq) - len(prompt), seq[-1]) == "sentence"


def test_stop_checker_rules_and_precedence():
    c = StopChecker(eos_ids=[1, 2], sentence_ids=[7, 8], prompt_len=10, min_new_tokens=3,
                    max_new_tokens=6)
    assert c.check(1, 5) is None
    assert c.check(1, 1) == "eos"                 # eos needs no minimum
    assert c.check(2, 7) is None                  # sentence end before min_new_tokens
    assert c.check(3, 8) == "sentence"
    assert c.check(6, 2) == "eos"                 # eos wins over max_tokens
    assert c.check(6, 7) == "sentence"
    assert c.check(6, 5) == "max_tokens"
    off = StopChecker([1], None, 10, 0, 4)
    assert off.check(2, 7) is None and off.check(4, 7) == "max_tokens"
    with pytest.raises(ConfigError, match="max_new_tokens"):
        StopChecker([1], None, 0, 0, 0)
    with pytest.raises(ConfigError, match="eos_ids"):
        StopChecker("eos", None, 0, 0, 5)


class Steer(LogitsProcessor):
    """Test-only: make a random model emit a fixed script of ids, so stops are predictable."""

    def __init__(self, prompt_len, script):
        self.prompt_len, self.script = prompt_len, script

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        for b in range(input_ids.shape[0]):
            i = input_ids.shape[1] - self.prompt_len
            scores[b, self.script[b][i % len(self.script[b])]] += 1e4
        return scores


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(CHAR) + 2, hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=256, pad_token_id=0, eos_token_id=None,
                      bos_token_id=None)
    return Qwen2ForCausalLM(cfg).eval()


def simulate(checker, gen):
    """What the decoder does: check after each committed token."""
    for n, tok in enumerate(gen, start=1):
        why = checker.check(n, tok)
        if why:
            return n, why
    return len(gen), None


@pytest.mark.parametrize("script, why, n_expected", [
    (list("说话。人时语速."), "sentence", 8),    # the 。 at 3 is before min_new_tokens=4
    (list("说话人时语速较"), "max_tokens", 12),
    (list("说话人") + ["<eos>"], "eos", 4),
])
def test_generate_criteria_stop_where_the_checker_stops(model, script, why, n_expected):
    gen_script = (CHAR.convert_tokens_to_ids(script) * 5)[:30]
    prompt = t([CHAR.encode("说话人语速较慢，")])
    checker = StopChecker([1, 2], TokenClasses.for_tokenizer(CHAR), prompt.shape[1],
                          min_new_tokens=4, max_new_tokens=12)
    assert simulate(checker, gen_script) == (n_expected, why)
    out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                         max_new_tokens=50, pad_token_id=0,
                         logits_processor=[Steer(prompt.shape[1], [gen_script])],
                         stopping_criteria=checker.criteria())
    assert out[0, prompt.shape[1]:].tolist() == gen_script[:n_expected]


def test_generate_criteria_batched_rows_stop_separately(model):
    prompt = t([CHAR.encode("说话人"), CHAR.encode("音调稳")])
    dot = CHAR.convert_tokens_to_ids("。")
    a = CHAR.convert_tokens_to_ids(list("说话人")) + [dot]
    b = CHAR.convert_tokens_to_ids(list("慢慢说话时语速"))
    checker = StopChecker([1], [dot], prompt.shape[1], min_new_tokens=2, max_new_tokens=9)
    out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                         max_new_tokens=50, pad_token_id=0,
                         logits_processor=[Steer(prompt.shape[1], [a, b])],
                         stopping_criteria=checker.criteria())
    new = out[:, prompt.shape[1]:].tolist()
    assert new[0][:4] == a and all(x == 0 for x in new[0][4:])   # stopped at 。, then padding
    assert len(new[1]) == 9 and new[1] == (b * 2)[:9]             # ran to max_new_tokens
